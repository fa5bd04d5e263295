"""Reference for the cross_entropy family: cross-entropy of logits [..., V] (classes last) against
integer targets, with F.cross_entropy's options (class weights, ignore_index, reduction, label
smoothing) plus z-loss and logit soft-capping. The options come with the inputs, so one problem
covers every reduction; with the defaults this is F.cross_entropy(logits, target)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BACKWARD = True
DTYPE = torch.bfloat16


def cross_entropy_reference(logits, target, weight=None, reduction="mean", label_smoothing=0.0, z_loss=0.0,
                            softcap=None, ignore_index=-100):
    """F.cross_entropy over rows of logits [..., V] after an optional softcap * tanh(x / softcap), plus
    z_loss * logsumexp^2 per kept row, reduced like the loss (a mean divides by the same denominator)."""
    v = logits.shape[-1]
    x, t = logits.reshape(-1, v), target.reshape(-1)
    if softcap is not None:
        x = softcap * torch.tanh(x / softcap)
    w = weight.detach().to(x.dtype) if weight is not None else None  # no gradient; torch wants x's dtype
    loss = F.cross_entropy(x, t, weight=w, ignore_index=ignore_index, reduction=reduction,
                           label_smoothing=label_smoothing)
    if z_loss:
        kept = t != ignore_index
        lse = torch.logsumexp(x.to(torch.promote_types(x.dtype, torch.float32)), dim=-1)
        z = z_loss * torch.where(kept, lse * lse, torch.zeros_like(lse))
        if reduction == "none":
            loss = loss + z.to(loss.dtype)
        else:
            total = z.sum()
            if reduction == "mean":
                share = w[t.clamp(min=0)] if w is not None else torch.ones_like(lse)
                total = total / torch.where(kept, share.to(lse.dtype), torch.zeros_like(lse)).sum()
            loss = loss + total.to(loss.dtype)
    return loss.reshape(target.shape) if reduction == "none" else loss


class Model(nn.Module):
    """cross_entropy_reference(logits, target, weight, reduction, label_smoothing, z_loss, softcap,
    ignore_index): a 0-dim loss (mean, sum) or one per row (none), in the logits' dtype."""

    def __init__(self):
        super().__init__()

    def forward(self, logits, target, weight=None, reduction="mean", label_smoothing=0.0, z_loss=0.0, softcap=None,
                ignore_index=-100):
        return cross_entropy_reference(logits, target, weight, reduction, label_smoothing, z_loss, softcap,
                                       ignore_index)


def _logits(shape, scale=1.0, dtype=DTYPE):
    return (torch.randn(*shape) * scale).to(dtype)


def _target(shape, v, ignored_every=0):
    t = torch.randint(0, v, shape, dtype=torch.int64)
    if ignored_every:
        t.view(-1)[::ignored_every] = -100
    return t


def _weight(v):
    return (0.5 + torch.rand(v)).to(DTYPE)


def get_inputs():
    return [_logits((4096, 32000)), _target((4096,), 32000)]  # 250 MiB of bf16 logits


def get_init_inputs():
    return []


def get_test_inputs():
    """Small sets (the CPU interpreter runs them): one row, vocabularies just below / above a power of
    two and wider than a column block, huge logits (a naive exp overflows), ignored rows, a 3-D
    batch, every reduction, class weights, label smoothing, z-loss and soft-capping, all rows ignored
    (sum: 0), fp32 and fp16; then two wide sets for the GPU."""
    return [
        [_logits((1, 1000)), _target((1,), 1000)],
        [_logits((5, 1023)), _target((5,), 1023), None, "sum"],
        [_logits((5, 1025)), _target((5,), 1025), None, "none"],
        [_logits((3, 20000)), _target((3,), 20000)],
        [_logits((8, 500), scale=100.0), _target((8,), 500, ignored_every=4)],
        [_logits((16, 3000)), _target((16,), 3000, ignored_every=3)],
        [_logits((2, 3, 777), dtype=torch.float32), _target((2, 3), 777, ignored_every=4), None, "none", 0.1],
        [_logits((6, 1001)), _target((6,), 1001, ignored_every=5), _weight(1001), "mean", 0.2],
        [_logits((9, 2047), scale=3.0), _target((9,), 2047, ignored_every=2), _weight(2047), "none"],
        [_logits((7, 999), scale=20.0), _target((7,), 999), None, "sum", 0.0, 1e-3, 30.0],
        [_logits((5, 640), scale=4.0), _target((5,), 640, ignored_every=3), _weight(640), "mean", 0.1, 1e-2, 15.0],
        [_logits((4, 513)), torch.full((4,), -100, dtype=torch.int64), None, "sum"],
        [_logits((4, 300), dtype=torch.float16), _target((4,), 300), None, "mean", 0.05],
        [_logits((64, 128256)), _target((64,), 128256, ignored_every=7)],
        [_logits((32, 50257), scale=8.0), _target((32,), 50257), None, "none", 0.1, 1e-4, 30.0],
    ]
