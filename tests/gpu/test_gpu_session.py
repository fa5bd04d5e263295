"""Several candidates verified at once in one session (the MCP server's) on one GPU: they are checked side
by side, and each is timed with the GPU to itself. Run on the H200: `pytest -m gpu tests/gpu`."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kernelagent.tools.session import Session
from tests.helpers.gate import LoggedGate

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
PROBLEM = ROOT / "problems/bench/softmax_16x16384.py"
KERNEL = ROOT / "examples/softmax/kernel.py"


def test_concurrent_candidates_are_timed_one_at_a_time(tmp_path):
    gate = LoggedGate(tmp_path / "gpu.lock")
    session = Session(device="cuda", pool_size=3, gate=gate)
    try:
        session.warm()
        verifier = session.verifier(seeds=2)
        verifier.verify(PROBLEM, KERNEL)   # the reference pack and baselines, once
        session.pool.settle()              # the replacements of the workers it used idle in the pool
        gate.log.clear()
        copies = []
        for i in range(3):
            copies.append(tmp_path / f"cand_{i}.py")
            copies[-1].write_text(KERNEL.read_text() + f"\n# copy {i}\n")
        reports: list = [None] * 3

        def one(i: int) -> None:
            reports[i] = verifier.verify(PROBLEM, copies[i])

        threads = [threading.Thread(target=one, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
    finally:
        session.close()
    assert all(r is not None and r.accepted for r in reports), [getattr(r, "message", None) for r in reports]
    held = {"SH": 0, "EX": 0}
    most_shared = 0
    for kind, d in gate.log:
        held[kind] += d
        assert held["EX"] <= 1 and not (held["EX"] and held["SH"]), f"timing overlapped other GPU work: {gate.log}"
        most_shared = max(most_shared, held["SH"])
    assert sum(1 for kind, d in gate.log if kind == "EX" and d == 1) == 3, "each candidate timed under the lock"
    assert all("worker_timing_wait" in r.metrics["cost_seconds"] for r in reports)
    assert most_shared >= 2, "the checks of candidates verified at once ran side by side"
    # the pooled workers compiled their warm-up kernel before their GPU turn, without making a CUDA context
    # (a worker started on demand, when none was idle, warms nothing: it has no warm-up notes)
    ahead = [r.metrics["cost_notes"]["warmup"].get("warmup_ahead") for r in reports
             if r.metrics["cost_notes"]["warmup"]]
    assert len(ahead) >= 2 and all(a and a["ok"] and a["context"] is False for a in ahead), ahead
