"""The measurement's warm-up and its first samples on a fake GPU and a fake host clock: warm-up calls queue no
spin but are refreshed and fingerprinted like any call, and the first call's one-off host time does not size
the spin of the first samples (on the H200 a spin sized from it, 25 ms, was queued before each warm-up call:
0.27-0.38 s of a verification's timing stage on a 7 us kernel)."""

from __future__ import annotations

import pytest

from kernelagent.verifier.measure import timing as T
from kernelagent.verifier.measure.timing import Workload, measure
from tests.helpers.fakegpu import FakeGPU


@pytest.fixture
def host(monkeypatch):
    """A host clock the workload advances: call 0's preparation takes 30 ms, every other step 0.1 ms."""
    clock = {"s": 0.0}
    monkeypatch.setattr(T, "_perf_counter", lambda: clock["s"])
    return clock


def _run(monkeypatch, host):
    gpu = FakeGPU(monkeypatch)
    spins: list[float] = []

    def spin(cycles: int) -> None:
        spins.append(cycles / 1e6)  # ms (the fake's 1e6 cycles per ms)
        gpu.advance(1.0, "spin")

    monkeypatch.setattr(T, "_spin", spin)
    prepared, after = [], []

    def prepare(i: int, slot: int) -> None:
        prepared.append(i)
        host["s"] += 0.030 if i == 0 else 0.0001

    def run(slot: int) -> None:
        host["s"] += 0.0001
        gpu.advance(0.05, "run")

    res = measure(Workload(run=run, prepare=prepare, after=lambda i, slot: after.append(i)), use_graph=False)
    return res, spins, prepared, after


def test_warm_up_calls_queue_no_spin_and_are_still_refreshed_and_fingerprinted(monkeypatch, host):
    res, spins, prepared, after = _run(monkeypatch, host)
    assert len(spins) == 5 + res.n  # the first samples and the repetitions, nothing for the warm-up
    assert prepared == after == list(range(res.calls))  # every call new values and a fingerprint, warm-up too
    assert res.calls > 3 + 5 + res.n  # there was a warm-up


def test_the_first_calls_one_off_host_time_does_not_size_the_first_spins(monkeypatch, host):
    _, spins, _, _ = _run(monkeypatch, host)
    assert max(spins[:5]) < 1.0  # from the 0.2 ms calls after it; sized from call 0's 30 ms it would be 25 ms
    assert min(spins[:5]) > 0
