# expect: try_around_kernel
# Falls back to PyTorch when the kernel fails.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=-float("inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * n_cols + offs, e / tl.sum(e, 0), mask=offs < n_cols)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        try:
            _softmax[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        except Exception:
            y = torch.softmax(x, dim=-1)
        return y
