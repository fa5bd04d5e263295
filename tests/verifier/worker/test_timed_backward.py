"""Timed calls of a problem with a backward (BACKWARD = True) and parameters, on CPU: what the verifier
itself dispatches is not the candidate's, and both sides fingerprint the same gradients in one order.

On the H200 every shipped library kernel with a backward was rejected by these two (batch run of
2026-12-02): the upstream gradients' `randn` counted as the candidate's PyTorch compute
(fallback_to_reference), and the candidate's timed calls fingerprinted the weight's gradient while the
reference's did not (timing_violation: "returned 3 output tensor(s); the reference 2").
"""

from __future__ import annotations

import torch
import torch.nn as nn

from kernelagent.verifier.measure.fresh import trainable
from kernelagent.verifier.reference.baseline import _call
from kernelagent.verifier.worker.integrity import OpRecorder
from kernelagent.verifier.worker.timed import TimedCalls


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.tensor([1.0, 2.0, 3.0]))
        self.bias = nn.Parameter(torch.tensor([0.5, 0.5, 0.5]))
        self.frozen = nn.Parameter(torch.ones(3), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight + self.bias


class _Refresher:
    def __init__(self, x: torch.Tensor):
        self.buffers = [[x]]

    def fill(self, i: int, slot: int) -> list[torch.Tensor]:
        return self.buffers[slot]


class _Plan:
    @staticmethod
    def seed(i: int) -> int:
        return 1234 + i


def _timed_call(model: nn.Module, params: list[torch.Tensor] | None = None) -> TimedCalls:
    extra = {} if params is None else {"params": params}
    calls = TimedCalls(model, _Refresher(torch.randn(4, 3)), _Plan(), True, None, OpRecorder, **extra)
    calls.prepare(0, 0)
    calls.run(0)
    return calls


def test_the_upstream_gradients_are_not_recorded_as_the_candidates_ops():
    calls = _timed_call(Scaled())
    ops = calls.records[0].ops
    assert not [op for op in ops if "randn" in op or "normal" in op], ops
    assert any("mul" in op for op in ops)  # the candidate's own forward and backward still are


def test_timed_call_gradients_match_the_reference_side_in_count_and_order():
    torch.manual_seed(0)
    model = Scaled()
    calls = _timed_call(model)
    x = calls.refresher.buffers[0][0].detach().clone()
    ref = _call(model, [x], True, _Plan.seed(0))
    cand = [g for g in calls.grads[0] if g is not None]
    assert len(ref) == 1 + len(cand)  # the output, then dx, dbias, dweight
    for a, b in zip(ref[1:], cand, strict=True):
        torch.testing.assert_close(a, b)
    assert [p.shape for p in trainable(model)] == [torch.Size([3]), torch.Size([3])]  # frozen left out


def test_a_candidates_extra_parameter_is_not_fingerprinted():
    model = Scaled()
    model.extra = nn.Parameter(torch.zeros(1))  # not the reference's: no gradient of it is compared
    params = trainable(model, {"weight", "bias", "frozen"})
    assert len(params) == 2 and all(p is not model.extra for p in params)
    calls = _timed_call(model, params)
    assert len(calls.grads[0]) == 1 + 2


def test_later_calls_draw_their_upstream_gradients_before_the_call(monkeypatch):
    """From a slot's second call on the upstream gradients are drawn in `prepare` (outside the timed
    region), with the same values the reference side draws for that call's seed."""
    from kernelagent.verifier.worker import timed

    torch.manual_seed(0)
    model = Scaled()
    calls = _timed_call(model)
    inline = []
    real = timed.grad_outputs_for
    monkeypatch.setattr(timed, "grad_outputs_for", lambda *a: inline.append(1) or real(*a))
    calls.prepare(1, 0)
    assert calls._gos is not None
    calls.run(0)
    assert not inline  # nothing drawn inside the call
    x = calls.refresher.buffers[0][0].detach().clone()
    ref = _call(model, [x], True, _Plan.seed(1))
    for a, b in zip(ref[1:], [g for g in calls.grads[0] if g is not None], strict=True):
        torch.testing.assert_close(a, b)
