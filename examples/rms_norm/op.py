"""RMSNorm over the last dimension with a learned weight, bfloat16 (a KernelBench-format problem).

Run: `kernelagent verify examples/rms_norm/kernel.py --ref examples/rms_norm/op.py`.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPE = torch.bfloat16
HIDDEN = 5120  # not a power of two: the kernel's masks are exercised by every input


class Model(nn.Module):
    """y = x / sqrt(mean(x**2, dim=-1) + eps) * weight."""

    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        # Ones plus noise, not plain ones, so that a kernel ignoring the weight cannot pass.
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden_size)).to(DTYPE))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, self.weight.shape, self.weight, self.eps)


def get_inputs():
    return [torch.randn(16384, HIDDEN, dtype=DTYPE)]  # 160 MiB


def get_init_inputs():
    return [HIDDEN]


def get_test_inputs():
    """Small sets for the CPU interpreter (the width is fixed by the weight): one row, a few rows,
    a 3-D input, rows with a large scale."""
    return [
        [torch.randn(1, HIDDEN, dtype=DTYPE)],
        [torch.randn(7, HIDDEN, dtype=DTYPE)],
        [torch.randn(2, 3, HIDDEN, dtype=DTYPE)],
        [(torch.randn(4, HIDDEN) * 300.0).to(DTYPE)],
    ]
