# expect: no_kernel_launched
# policy: on
# problem: transpose
# needle: launched none
"""Solved with allowed ops only: a transposed view made contiguous is the whole answer, no kernel."""

import torch.nn as nn
import triton  # noqa: F401 - makes the file look like a Triton candidate
import triton.language as tl


@triton.jit
def _transpose(x_ptr, y_ptr, m, n, BLOCK: tl.constexpr):
    pass


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.t().contiguous()
