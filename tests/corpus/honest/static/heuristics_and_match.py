"""Honest: a triton.heuristics value and a grid callable computed from the launch's sizes, and a match on
plain values."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.heuristics({"EVEN_N": lambda args: args["n_cols"] % args["BLOCK"] == 0})
@triton.jit
def scale_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr, EVEN_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    if EVEN_N:
        v = tl.load(x_ptr + row * n_cols + cols)
        tl.store(y_ptr + row * n_cols + cols, v * 2.0)
    else:
        mask = cols < n_cols
        v = tl.load(x_ptr + row * n_cols + cols, mask=mask)
        tl.store(y_ptr + row * n_cols + cols, v * 2.0, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        match x.dim():
            case 2:
                rows, cols = x.shape
            case int(other):
                raise ValueError(f"expected a 2-D input, got {other} dimensions")
        y = torch.empty_like(x)
        scale_kernel[lambda meta: (rows,)](x, y, cols, BLOCK=triton.next_power_of_2(cols))
        return y
