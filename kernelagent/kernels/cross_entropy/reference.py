"""Reference for the cross_entropy family: mean cross-entropy of logits [N, V] against int64 targets."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BACKWARD = True
DTYPE = torch.bfloat16


class Model(nn.Module):
    """F.cross_entropy(logits, targets): mean over rows of logsumexp(row) - row[target], rows with
    target -100 left out; a 0-dim tensor in the logits' dtype."""

    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)


def _inputs(n: int, v: int, scale: float = 1.0, dtype: torch.dtype = DTYPE) -> list[torch.Tensor]:
    return [(torch.randn(n, v) * scale).to(dtype), torch.randint(0, v, (n,), dtype=torch.int64)]


def get_inputs():
    return _inputs(4096, 32000)  # 250 MiB of logits


def get_init_inputs():
    return []


def get_test_inputs():
    """Small sets (CPU interpreter): one row, vocabularies just below / above a power of two, one
    wider than a column block, large logits, ignored (-100) targets; bf16 and fp32."""
    ignored = _inputs(16, 3000)
    ignored[1][::3] = -100
    return [
        _inputs(1, 1000),
        _inputs(5, 1023),
        _inputs(5, 1025),
        _inputs(3, 20000),
        _inputs(8, 500, scale=40.0),
        ignored,
        _inputs(6, 777, dtype=torch.float32),
    ]
