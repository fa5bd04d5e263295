"""Mean cross-entropy loss of bfloat16 logits [N, V] against int64 class targets (KernelBench format).

Run: `kernelagent verify examples/cross_entropy/kernel.py --ref examples/cross_entropy/op.py`.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPE = torch.bfloat16
VOCAB = 128256  # Llama-3 vocabulary


class Model(nn.Module):
    """F.cross_entropy(logits, targets): mean over rows of logsumexp(row) - row[target]; rows whose
    target is -100 (the default ignore_index) are left out of the mean. Returns a 0-dim tensor in
    the logits' dtype."""

    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)


def _inputs(n: int, v: int, scale: float = 1.0) -> list[torch.Tensor]:
    logits = (torch.randn(n, v) * scale).to(DTYPE)
    return [logits, torch.randint(0, v, (n,), dtype=torch.int64)]


def get_inputs():
    return _inputs(1024, VOCAB)  # 251 MiB of logits


def get_init_inputs():
    return []


def get_test_inputs():
    """Small sets for the CPU interpreter: one row, vocabularies just below / above a power of two,
    a vocabulary wider than one column block, large logits, and some ignored (-100) targets."""
    ignored = _inputs(16, 3000)
    ignored[1][::3] = -100
    return [
        _inputs(1, 1000),
        _inputs(5, 1023),
        _inputs(5, 1025),
        _inputs(3, 20000),
        _inputs(8, 500, scale=40.0),
        ignored,
    ]
