"""The MCP session's plumbing without workers: the GPU gate (threads and processes), cancellable jobs,
and the gated worker proxy."""

from __future__ import annotations

import multiprocessing as mp
import subprocess
import threading
from dataclasses import dataclass

import pytest

from kernelagent.tools.session import Cancelled, GatedWorker, GpuGate, Job, SessionPool, current_job


@dataclass
class Req:
    role: str
    timing: bool = True
    gpu_lock: str | None = None


@pytest.mark.parametrize(("mode", "request_", "gated"), [
    ("cuda", Req("candidate"), True),
    ("cuda", Req("reference"), True),
    ("cuda", {"role": "candidate", "timing": True}, True),
    ("cuda", Req("candidate", timing=False), False),
    ("cuda", Req("aot"), False),
    ("cuda", Req("match"), False),
    ("cpu", Req("candidate"), False),
    ("cuda", Req("candidate", gpu_lock="/x.lock"), False),
])
def test_only_timed_gpu_runs_take_the_gate(mode, request_, gated):
    assert GpuGate.needed(mode, request_) is gated


def test_gate_admits_one_thread_at_a_time(tmp_path):
    gate = GpuGate(tmp_path / "gpu.lock")
    inside, most = [0], [0]
    guard = threading.Lock()
    start = threading.Barrier(4)

    def use() -> None:
        start.wait()
        for _ in range(20):
            with gate.held():
                with guard:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                with guard:
                    inside[0] -= 1

    threads = [threading.Thread(target=use) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1


def _hold(path: str, held: mp.Event, release: mp.Event) -> None:
    from pathlib import Path

    with GpuGate(Path(path)).held():
        held.set()
        release.wait(30)


def test_gate_waits_for_another_process(tmp_path):
    ctx = mp.get_context("fork")
    held, release = ctx.Event(), ctx.Event()
    child = ctx.Process(target=_hold, args=(str(tmp_path / "gpu.lock"), held, release))
    child.start()
    assert held.wait(30)
    got = threading.Event()

    def take() -> None:
        with GpuGate(tmp_path / "gpu.lock").held():
            got.set()

    t = threading.Thread(target=take)
    t.start()
    assert not got.wait(0.5)     # the other process holds it
    release.set()
    assert got.wait(30)
    t.join()
    child.join(30)


class FakeWorker:
    def __init__(self, mode: str, gate: GpuGate | None = None):
        self.mode, self.gate, self.workdir = mode, gate, "/nowhere"
        self.proc = subprocess.Popen(["sleep", "60"], start_new_session=True)

    def run(self, request, timeout, memory_limit_mb=None):
        return {"gated": self.gate._lock.locked() if self.gate else None, "timeout": timeout}


def test_gated_worker_runs_timed_requests_under_the_gate(tmp_path):
    gate = GpuGate(tmp_path / "gpu.lock")
    fake = FakeWorker("cuda", gate)
    proxy = GatedWorker(fake, gate)
    assert proxy.workdir == "/nowhere" and proxy.mode == "cuda"
    assert proxy.run(Req("candidate"), 5) == {"gated": True, "timeout": 5}
    assert proxy.run(Req("candidate", timing=False), 5)["gated"] is False
    fake.proc.kill()
    fake.proc.wait()


def test_cancel_kills_the_jobs_workers_and_refuses_new_ones(tmp_path):
    job = Job()
    workers = [FakeWorker("cpu"), FakeWorker("cpu")]
    for w in workers:
        job.add(w)
    job.cancel()
    assert all(w.proc.wait(10) is not None for w in workers)
    pool = SessionPool(0, GpuGate(tmp_path / "gpu.lock"))
    with pytest.raises(Cancelled):
        job.run(lambda: pool.acquire("cpu"))
    late = FakeWorker("cpu")
    with pytest.raises(Cancelled):
        job.add(late)                 # handed out after the cancel: killed at once
    assert late.proc.wait(10) is not None


def test_job_is_current_only_inside_run():
    job = Job()
    assert job.run(current_job) is job
    assert current_job() is None
