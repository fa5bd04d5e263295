"""Later seeds rescale the buffers a model's constructor draws at random (running statistics), so a kernel that
keeps the first call's copies fails; buffers the constructor computes (a causal mask, a positional table) stay,
since an honest kernel may compute them itself (red team, 2026-12-05, both ways)."""

from __future__ import annotations

import torch
import torch.nn as nn

from kernelagent.verifier.reference.run import _drawn_buffers, _reinit_params, _state_buffers


class _Stateful(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mask", torch.tril(torch.ones(4, 4)))
        self.register_buffer("stats", torch.randn(6))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.register_buffer("scratch", torch.randn(3), persistent=False)


def _build(seed: int) -> _Stateful:
    torch.manual_seed(seed)
    return _Stateful()


def test_only_drawn_persistent_floating_buffers_are_rescaled():
    model = _build(1)
    drawn = _drawn_buffers(model, _build(2))
    assert drawn == {"stats", "scratch"}
    assert [b is model.stats for b in _state_buffers(model, drawn)] == [True]  # scratch is not in the state
    mask, stats, scratch = model.mask.clone(), model.stats.clone(), model.scratch.clone()
    _reinit_params(model, torch.Generator().manual_seed(0), drawn)
    assert torch.equal(model.mask, mask) and torch.equal(model.scratch, scratch)
    assert not torch.equal(model.stats, stats)
    ratio = model.stats / stats
    assert bool(((ratio >= 0.5) & (ratio <= 1.5)).all())  # signs kept, within a factor of two


def test_without_drawn_buffers_nothing_is_rescaled():
    model = _build(1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    _reinit_params(model, torch.Generator().manual_seed(0))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
