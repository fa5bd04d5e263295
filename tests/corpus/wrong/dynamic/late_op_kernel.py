# expect: fallback_to_reference
# policy: off
# problem: softmax
# needle: softmax
"""(Red team, 2026-12-01.) The candidate's own torch.library op gets a kernel registered in __init__, as a
lambda calling torch.softmax; forward calls the op and launches a copy kernel. The recorder runs every
library op's Python body under itself at dispatch time, however late it was registered."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def _launch(x):
    y = torch.empty_like(x)
    _copy[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
    return y


@torch.library.custom_op("rtk::row_op", mutates_args=())
def row_op(x: torch.Tensor) -> torch.Tensor:
    return _launch(x)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        row_op.register_kernel("cpu")(lambda x: torch.softmax(x, dim=-1))
        row_op.register_kernel("cuda")(lambda x: torch.softmax(x, dim=-1))

    def forward(self, x):
        x = x.contiguous()
        staged = _launch(x)
        return torch.ops.rtk.row_op(staged)
