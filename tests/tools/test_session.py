"""The MCP session's plumbing without workers: the GPU gate (a readers-writer lock across threads and
processes), a candidate's timing turn, cancellable jobs, and the gated worker proxy."""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import threading
from dataclasses import dataclass

import pytest

from kernelagent.tools.session import Cancelled, GatedWorker, GpuGate, Job, SessionPool, TimingTurn, current_job
from kernelagent.verifier.protocol import CandidateRequest
from tests.helpers.gate import LoggedGate


@dataclass
class Req:
    role: str
    timing: bool = True


@pytest.mark.parametrize(("mode", "request_", "gated"), [
    ("cuda", Req("candidate"), True),
    ("cuda", Req("reference"), True),
    ("cuda", {"role": "candidate", "timing": True}, True),
    ("cuda", Req("candidate", timing=False), False),
    ("cuda", Req("aot"), False),
    ("cuda", Req("match"), False),
    ("cpu", Req("candidate"), False),
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


def test_shared_holders_coexist_and_exclusive_waits_for_them(tmp_path):
    gate = GpuGate(tmp_path / "gpu.lock")
    a, b = gate.take(shared=True), gate.take(shared=True)   # two checks at once
    got = threading.Event()

    def time_it() -> None:
        with gate.held():
            got.set()

    t = threading.Thread(target=time_it)
    t.start()
    assert not got.wait(0.3)
    gate.give(a)
    assert not got.wait(0.3)    # one check still runs
    gate.give(b)
    assert got.wait(30)
    t.join()


def test_shared_waits_while_someone_is_timed(tmp_path):
    gate = GpuGate(tmp_path / "gpu.lock")
    ex = gate.take()
    got = threading.Event()
    t = threading.Thread(target=lambda: (gate.give(gate.take(shared=True)), got.set()))
    t.start()
    assert not got.wait(0.3)
    gate.give(ex)
    assert got.wait(30)
    t.join()


def test_a_waiting_timing_goes_before_checks_that_come_later(tmp_path):
    """Writers first: a check arriving while a timing waits queues behind it (flock alone lets a stream of
    checks starve the timing, whose wait is not counted against its worker's time limit)."""
    gate = GpuGate(tmp_path / "gpu.lock")
    first = gate.take(shared=True)
    order: list[str] = []

    def timing() -> None:
        fd = gate.take()
        order.append("timing")
        gate.give(fd)

    def late_check() -> None:
        fd = gate.take(shared=True)
        order.append("check")
        gate.give(fd)

    t = threading.Thread(target=timing, daemon=True)
    c = threading.Thread(target=late_check, daemon=True)
    try:
        t.start()
        assert not _joined(t, 0.3)              # waits for the first check
        c.start()
        late_slipped_in = _joined(c, 0.3)
    finally:
        gate.give(first)
    assert not late_slipped_in, "a later check does not slip in ahead of the waiting timing"
    assert _joined(t, 30) and _joined(c, 30)
    assert order == ["timing", "check"]


def test_timing_turn_trades_shared_for_exclusive_and_ends_clean(tmp_path):
    gate = LoggedGate(tmp_path / "gpu.lock")
    turn = TimingTurn(gate)
    assert gate.holding() == {"SH": 1, "EX": 0}
    turn.exclusive()
    assert gate.holding() == {"SH": 0, "EX": 1}
    turn.end()
    turn.end()
    assert gate.holding() == {"SH": 0, "EX": 0}
    turn.exclusive()            # asked after the run was over (the worker died): nothing is taken
    assert gate.holding() == {"SH": 0, "EX": 0}


def test_timing_turn_granted_after_the_run_ended_is_given_back(tmp_path):
    gate = LoggedGate(tmp_path / "gpu.lock")
    other = gate.take(shared=True)          # another candidate's check keeps the exclusive lock away
    turn = TimingTurn(gate)
    asked = threading.Thread(target=turn.exclusive)
    asked.start()
    assert not _joined(asked, 0.3)
    turn.end()                              # the worker ended while its turn was still waited for
    gate.give(other)
    assert _joined(asked, 30)
    assert gate.holding() == {"SH": 0, "EX": 0}


def _joined(t: threading.Thread, seconds: float) -> bool:
    t.join(seconds)
    return not t.is_alive()


class FakeWorker:
    def __init__(self, mode: str, gate: LoggedGate | None = None):
        self.mode, self.gate, self.workdir = mode, gate, "/nowhere"
        self.proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
        self.calls: list[tuple] = []

    def run(self, request, timeout, memory_limit_mb=None, on_constructed=None, on_timing=None):
        held = [self.gate.holding() if self.gate else None]
        if on_timing is not None:
            on_timing()
            held.append(self.gate.holding())
        self.calls.append((request, on_timing is not None))
        return {"held": held, "timeout": timeout}


def _candidate(timing: bool = True) -> CandidateRequest:
    return CandidateRequest(candidate="c.py", device="cuda", in_dir="/in", out_dir="/out", timing=timing)


def test_gated_worker_checks_shared_then_times_alone(tmp_path):
    gate = LoggedGate(tmp_path / "gpu.lock")
    fake = FakeWorker("cuda", gate)
    proxy = GatedWorker(fake, gate)
    assert proxy.workdir == "/nowhere" and proxy.mode == "cuda"
    out = proxy.run(_candidate(), 5)
    assert out["held"] == [{"SH": 1, "EX": 0}, {"SH": 0, "EX": 1}] and out["timeout"] == 5
    request, turned = fake.calls[-1]
    assert turned and request.timing_turn, "the worker is told to wait for its turn"
    assert gate.holding() == {"SH": 0, "EX": 0}
    # a reference run times the baselines throughout: alone from the start; untimed runs take nothing
    assert proxy.run(Req("reference"), 5)["held"] == [{"SH": 0, "EX": 1}]
    assert proxy.run(_candidate(timing=False), 5)["held"] == [{"SH": 0, "EX": 0}]
    assert not fake.calls[-1][0].timing_turn
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


def test_session_pool_runs_are_gated_by_the_workers_and_starts_share_the_gate(tmp_path):
    gate = LoggedGate(tmp_path / "gpu.lock")
    pool = SessionPool(0, gate)
    with pool.run_quiet():             # the gated workers take the gate themselves: nothing held here
        assert gate.holding() == {"SH": 0, "EX": 0}
    with pool.gpu_quiet():             # a GPU worker starting is GPU work like a check
        assert gate.holding() == {"SH": 1, "EX": 0}
        with pool.gpu_quiet():         # several may start at once
            assert gate.holding() == {"SH": 2, "EX": 0}
    assert gate.holding() == {"SH": 0, "EX": 0}


def test_a_cancelled_job_stops_waiting_for_the_gate(tmp_path):
    gate = LoggedGate(tmp_path / "gpu.lock")
    busy = gate.take()                      # someone is timed
    cancelled = threading.Event()
    got: list[int] = []
    t = threading.Thread(target=lambda: got.append(gate.take(shared=True, give_up=cancelled.is_set)), daemon=True)
    try:
        t.start()
        assert not _joined(t, 0.2)
        cancelled.set()
        assert _joined(t, 30) and got == [-1], "it stopped waiting and holds nothing"
        with pytest.raises(Cancelled):
            TimingTurn(gate, cancelled=lambda: True)
        with pytest.raises(Cancelled), gate.held(give_up=lambda: True):
            pass
    finally:
        gate.give(busy)
    assert gate.holding() == {"SH": 0, "EX": 0}


def test_lock_files_live_on_a_local_file_system():
    gate = GpuGate()
    if os.access("/dev/shm", os.W_OK):
        assert str(gate.path).startswith("/dev/shm/kernelagent-locks-")


def test_a_limit_spent_waiting_for_the_gpu_is_not_the_candidates():
    from kernelagent.verifier.judge.verdict import _dead_worker
    from kernelagent.verifier.options import VerifyOptions
    from kernelagent.verifier.report import Report
    from kernelagent.verifier.sandbox.pool import WorkerResult

    busy = _dead_worker(Report(), [], WorkerResult(status="gpu_busy"), VerifyOptions(timeout=30))
    assert busy.category == "internal_error" and busy.blame == "verifier" and "busy" in busy.message
    late = _dead_worker(Report(), [], WorkerResult(status="timeout"), VerifyOptions(timeout=30))
    assert late.category == "timeout" and late.blame == "candidate"
