"""Reference for the layer_norm family: LayerNorm over the last dimension with a learned weight and bias."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BACKWARD = True
DTYPE = torch.bfloat16
HIDDEN = 4096


class Model(nn.Module):
    """y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias over the last dimension."""

    def __init__(self, hidden_size: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        # Not ones and zeros, so that a kernel ignoring the weight or the bias cannot pass.
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden_size)).to(DTYPE))
        self.bias = nn.Parameter((0.1 * torch.randn(hidden_size)).to(DTYPE))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)


def get_inputs():
    return [torch.randn(16384, HIDDEN, dtype=DTYPE)]  # 128 MiB


def get_init_inputs():
    return [HIDDEN]


def get_test_inputs():
    """Small sets (CPU interpreter; the width is fixed by the weight): one row, a few rows, a 3-D
    input, a large offset (a one-pass variance would cancel) and a large scale."""
    return [
        [torch.randn(1, HIDDEN, dtype=DTYPE)],
        [torch.randn(7, HIDDEN, dtype=DTYPE)],
        [torch.randn(2, 3, HIDDEN, dtype=DTYPE)],
        [(torch.randn(5, HIDDEN) + 30.0).to(DTYPE)],
        [(torch.randn(5, HIDDEN) * 300.0).to(DTYPE)],
    ]
