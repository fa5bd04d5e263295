import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, scratch_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)
    # an unmasked read just past the end of the row: for the last row it leaves the tensor. The
    # result is right, so only compute-sanitizer's memcheck can tell.
    tl.store(scratch_ptr + row, tl.load(x_ptr + row * stride + n_cols + 8))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        scratch = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
        n_rows, n_cols = x.shape
        softmax_kernel[(n_rows,)](x, y, scratch, n_cols, x.stride(0), BLOCK=triton.next_power_of_2(n_cols))
        return y
