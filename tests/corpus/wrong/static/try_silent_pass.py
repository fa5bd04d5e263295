# expect: try_around_kernel
# Swallows any kernel error and returns whatever is in the buffer.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _neg(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, -tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _launch(x, y):
    _neg[(triton.cdiv(x.numel(), 512),)](x, y, x.numel(), BLOCK=512)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        try:
            _launch(x, y)
        except RuntimeError:
            pass
        return y
