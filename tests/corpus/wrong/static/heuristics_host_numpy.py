# expect: torch_compute
# (Red team 5.) A triton.heuristics value runs at every launch with the real tensors: NumPy writes the answer
# into the output there, the kernel only reloads and stores it.

import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl


def host(args):
    x = np.asarray(args["x_ptr"])
    y = np.asarray(args["y_ptr"])
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    y[...] = e / e.sum(axis=-1, keepdims=True)
    return 1


@triton.heuristics({"UNUSED": host})
@triton.jit
def noop(x_ptr, y_ptr, n_cols, UNUSED: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    v = tl.load(y_ptr + row * n_cols + cols, mask=mask)
    tl.store(y_ptr + row * n_cols + cols, v, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        n_rows, n_cols = x.shape
        noop[(n_rows,)](x, y, n_cols, BLOCK=triton.next_power_of_2(n_cols))
        return y
