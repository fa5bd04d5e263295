"""Reference for the linear_cross_entropy family: an output projection (weight [V, H], bias [V]) and
the cross-entropy of its logits against integer targets, with the options of the cross_entropy
family (ignore_index, reduction, label smoothing, z-loss, soft-capping). The options come with the
inputs, so one problem covers every reduction. V is odd on purpose; the gradients of hidden, weight
and bias are checked."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BACKWARD = True
DTYPE = torch.bfloat16
HIDDEN, VOCAB = 64, 1001


def cross_entropy_reference(logits, target, reduction="mean", label_smoothing=0.0, z_loss=0.0, softcap=None,
                            ignore_index=-100):
    """F.cross_entropy over rows of logits [..., V] after an optional softcap * tanh(x / softcap), plus
    z_loss * logsumexp^2 per kept row, reduced like the loss (a mean divides by the same count)."""
    v = logits.shape[-1]
    x, t = logits.reshape(-1, v), target.reshape(-1)
    if softcap is not None:
        x = softcap * torch.tanh(x / softcap)
    loss = F.cross_entropy(x, t, ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing)
    if z_loss:
        kept = t != ignore_index
        lse = torch.logsumexp(x.to(torch.promote_types(x.dtype, torch.float32)), dim=-1)
        z = z_loss * torch.where(kept, lse * lse, torch.zeros_like(lse))
        if reduction == "none":
            loss = loss + z.to(loss.dtype)
        else:
            total = z.sum() / kept.sum() if reduction == "mean" else z.sum()
            loss = loss + total.to(loss.dtype)
    return loss.reshape(target.shape) if reduction == "none" else loss


class Model(nn.Module):
    """cross_entropy_reference(F.linear(hidden, weight, bias), target, ...): a 0-dim loss (mean, sum)
    or one per row (none), in the hidden's dtype."""

    def __init__(self, hidden_size: int, vocab_size: int, bias: bool = True, dtype: torch.dtype = DTYPE):
        super().__init__()
        self.weight = nn.Parameter((torch.randn(vocab_size, hidden_size) / hidden_size**0.5).to(dtype))
        self.bias = nn.Parameter((0.1 * torch.randn(vocab_size)).to(dtype)) if bias else None

    def forward(self, hidden, target, reduction="mean", label_smoothing=0.0, z_loss=0.0, softcap=None,
                ignore_index=-100):
        logits = F.linear(hidden, self.weight, self.bias)
        return cross_entropy_reference(logits, target, reduction, label_smoothing, z_loss, softcap, ignore_index)


def _hidden(shape, scale=1.0):
    return (torch.randn(*shape, HIDDEN) * scale).to(DTYPE)


def _target(shape, ignored_every=0):
    t = torch.randint(0, VOCAB, shape, dtype=torch.int64)
    if ignored_every:
        t.view(-1)[::ignored_every] = -100
    return t


def get_inputs():
    # 8 sequences of 2048 tokens: the GPU's timing shape. Its logits (16384 x 1001) are far too much work
    # for the CPU interpreter, and at 1.06M input elements it is over the verifier's CPU cap, so it runs on
    # the GPU only
    return [_hidden((8, 2048)), _target((8, 2048))]


def get_init_inputs():
    return [HIDDEN, VOCAB, True]


def get_test_inputs():
    """Small sets (the CPU interpreter runs them): one row, rows not a multiple of a tile, a 3-D
    batch, ignored rows, every reduction, label smoothing, z-loss and soft-capping, large logits, all
    rows ignored (sum: 0); then one set for the GPU that spans several of ModelNew's chunks."""
    return [
        [_hidden((1,)), _target((1,))],
        [_hidden((37,)), _target((37,), ignored_every=3), "sum"],
        [_hidden((2, 9)), _target((2, 9), ignored_every=4), "none"],
        [_hidden((24,), scale=8.0), _target((24,)), "mean", 0.1, 1e-3, 30.0],
        [_hidden((19,)), _target((19,), ignored_every=2), "none", 0.2, 0.0, 20.0],
        [_hidden((8,)), torch.full((8,), -100, dtype=torch.int64), "sum"],
        [_hidden((70,)), _target((70,), ignored_every=5), "mean", 0.05],
        [_hidden((2, 8300)), _target((2, 8300), ignored_every=9)],
    ]
