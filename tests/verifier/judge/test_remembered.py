"""A memo keyed on input values, timed in pool mode (a slow get_inputs()): the repeated draws hit it, the
calls with a draw of their own do not. The figures come from the latter alone, and the judge holds the
difference against the candidate.

Red-team review 3 (2026-12-02) found that with a pool of eight draws such a memo returned right answers, so
every fingerprint matched, at the speed of a copy; review 5 that with the figures taken over all calls a
memo paying 2/3 of the work on a hit claimed 1.45x under the judge's ratio."""

from __future__ import annotations

import torch

from kernelagent.verifier.judge.timed import remembered
from kernelagent.verifier.measure.fresh import FRESH_EVERY, DrawMode
from kernelagent.verifier.protocol import TimingPlan
from kernelagent.verifier.worker.timed import time_model
from tests.helpers.fakegpu import FakeGPU


def get_inputs():
    return [torch.randn(64)]


class Memo(torch.nn.Module):
    """Computes (1 ms of GPU) on inputs it has not seen, pays `hit_ms` for a stored answer otherwise."""

    def __init__(self, gpu: FakeGPU, hit_ms: float | None) -> None:
        super().__init__()
        self.gpu, self.hit_ms, self.seen = gpu, hit_ms, {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = float(x.sum())
        if self.hit_ms is not None and key in self.seen:
            self.gpu.advance(self.hit_ms, "run")
            return self.seen[key]
        self.gpu.advance(1.0, "run")
        self.seen[key] = x * 2
        return self.seen[key]


def _timed(monkeypatch, hit_ms: float | None, fresh_every: int = FRESH_EVERY) -> dict:
    gpu = FakeGPU(monkeypatch)
    plan, mode = TimingPlan.new(), DrawMode("pool", pool=8, fresh_every=fresh_every)
    timing, _ = time_model(Memo(gpu, hit_ms), get_inputs, get_inputs(), plan, mode, "cpu", False,
                           fingerprints=False)
    timing = timing.to_dict()
    assert timing["method"] == "events"  # pool mode: one sample per call
    assert all(mode.is_fresh(plan, i) for i in timing["sample_calls"]) or not fresh_every
    return timing


def test_a_memo_on_input_values_gains_nothing_and_is_caught(monkeypatch):
    for hit_ms in (0.01, 0.69):  # a copy; recomputing a third of the rows (under the 1.5 ratio)
        timing = _timed(monkeypatch, hit_ms)
        assert abs(timing["median_ms"] - 1.0) < 1e-9, timing["median_ms"]  # the figures: fresh calls only
        assert len(timing["repeats_ms"]) >= 8
    found = remembered(_timed(monkeypatch, 0.01))
    assert "answers were remembered" in found, found


def test_an_honest_kernel_in_pool_mode_is_timed_as_before(monkeypatch):
    timing = _timed(monkeypatch, None)
    assert remembered(timing) == "" and abs(timing["median_ms"] - 1.0) < 1e-9
    assert "draw of their own" in " ".join(timing["notes"])


def test_packs_made_before_have_no_calls_of_their_own(monkeypatch):
    """fresh_every 0: every call repeats a pool draw, so nothing is split and nothing can be told."""
    timing = _timed(monkeypatch, 0.01, fresh_every=0)
    assert timing["repeats_ms"] == [] and remembered(timing) == ""


def test_the_rule_needs_enough_samples_of_each_kind():
    cand = {"samples_ms": [1.0] * 3, "repeats_ms": [0.01] * 20}
    assert remembered(cand) == ""  # three calls on new draws are too few to tell
    assert remembered({**cand, "samples_ms": [1.0] * 4})
