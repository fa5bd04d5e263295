"""Reference for the log_softmax family: log_softmax over the last dimension, forward and backward."""

import torch
import torch.nn as nn

BACKWARD = True


class Model(nn.Module):
    """log_softmax(x, dim=-1)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(8192, 8192, dtype=torch.bfloat16)]  # 128 MiB


def get_init_inputs():
    return []


def get_test_inputs():
    """Small sets (CPU interpreter): a single row, short rows several to a program, widths just
    below / above a power of two, a 3-D input, a row wide enough for the column loop, large
    logits; bf16, fp16 and fp32."""
    bf16 = torch.bfloat16
    return [
        [torch.randn(1, 1000, dtype=bf16)],
        [torch.randn(37, 3, dtype=bf16)],
        [torch.randn(5, 1023, dtype=bf16)],
        [torch.randn(5, 1025, dtype=torch.float16)],
        [torch.randn(2, 3, 513, dtype=bf16)],
        [torch.randn(1, 40000, dtype=bf16)],
        [torch.randn(9, 300) * 80.0],
        [torch.randn(6, 777)],
    ]
