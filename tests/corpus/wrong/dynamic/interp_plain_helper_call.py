# expect: runtime_error
# problem: softmax
# policy: off
# needle: ran during the launch
"""Red team round 10 (2026-12-03): the policy refuses a plain Python function called inside a Triton kernel (the
GPU compiler cannot compile it), but under the interpreter such a call simply runs, with the block's values at
hand. With the policy off the run-time wall must refuse it on its own: no Python beside the kernel's own code
(and Triton's) runs while a kernel is interpreted."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


def _normalise(v):
    e = tl.exp(v - tl.max(v, axis=0))
    return e / tl.sum(e, axis=0)


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n_cols
    v = tl.load(x_ptr + row * stride + offs, mask=m, other=float("-inf"))
    tl.store(y_ptr + row * stride + offs, _normalise(v), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), BLOCK=triton.next_power_of_2(n_cols))
        return y
