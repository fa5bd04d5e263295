"""A memo keyed on input values, timed in pool mode (a slow get_inputs()): the repeated draws hit it, the
calls with a draw of their own do not, and the judge holds the difference against the candidate.

Red-team review 3 (2026-12-02) found that with a pool of eight draws such a memo returned right answers,
so every fingerprint matched, at the speed of a copy."""

from __future__ import annotations

import torch

from kernelagent.verifier.judge.timed import remembered
from kernelagent.verifier.measure.fresh import FRESH_EVERY, DrawMode, Refresher
from kernelagent.verifier.protocol import TimingPlan
from kernelagent.verifier.worker.timed import TimedCalls
from tests.helpers.fakegpu import FakeGPU


def get_inputs():
    return [torch.randn(64)]


class Memo(torch.nn.Module):
    """Computes (1 ms of GPU) on inputs it has not seen, copies a stored answer (0.01 ms) otherwise."""

    def __init__(self, gpu: FakeGPU, remember: bool) -> None:
        super().__init__()
        self.gpu, self.remember, self.seen = gpu, remember, {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = float(x.sum())
        if self.remember and key in self.seen:
            self.gpu.advance(0.01, "run")
            return self.seen[key]
        self.gpu.advance(1.0, "run")
        self.seen[key] = x * 2
        return self.seen[key]


def _timed(monkeypatch, remember: bool, fresh_every: int = FRESH_EVERY):
    gpu = FakeGPU(monkeypatch)
    plan, mode = TimingPlan.new(), DrawMode("pool", pool=8, fresh_every=fresh_every)
    calls = TimedCalls(Memo(gpu, remember), Refresher(get_inputs, plan, mode, "cpu", get_inputs()), plan, False, None)
    timing = gpu.T.measure(calls.workload(), use_graph=False).to_dict()
    assert len(timing["sample_calls"]) == len(timing["samples_ms"]) >= 30
    return timing, (lambda i: mode.is_fresh(plan, i))


def test_a_memo_on_input_values_is_caught_in_pool_mode(monkeypatch):
    timing, is_fresh = _timed(monkeypatch, remember=True)
    assert timing["median_ms"] < 0.1  # what the memo would have been timed at
    found = remembered(timing, is_fresh)
    assert "answers were remembered" in found, found


def test_an_honest_kernel_in_pool_mode_is_not(monkeypatch):
    timing, is_fresh = _timed(monkeypatch, remember=False)
    assert remembered(timing, is_fresh) == ""


def test_without_draws_of_their_own_nothing_can_be_told(monkeypatch):
    """Packs made before the change (fresh_every 0): every call repeats a pool draw, so no comparison."""
    timing, is_fresh = _timed(monkeypatch, remember=True, fresh_every=0)
    assert remembered(timing, is_fresh) == ""


def test_the_rule_needs_enough_samples_of_each_kind():
    cand = {"method": "events", "samples_ms": [1.0, 1.0, 1.0] + [0.01] * 20, "sample_calls": list(range(23))}
    assert remembered(cand, lambda i: i < 3) == ""  # three calls on new draws are too few to tell
    cand["samples_ms"] = [1.0] * 4 + [0.01] * 20
    cand["sample_calls"] = list(range(24))
    assert remembered(cand, lambda i: i < 4)
    assert remembered({**cand, "method": "cuda_graph"}, lambda i: i < 4) == ""  # a replay mixes both kinds
