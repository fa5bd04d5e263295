# expect: runtime_error
# policy: off
# problem: relu
# needle: out-of-bounds
# gpu: no
"""Under the Triton interpreter a pointer is a host address: offsetting from a small tensor of its own,
a kernel reads the 8 bytes at the input tensor's Python object (any object of the worker's would do),
then computes the answer honestly. Any access outside the tensors a launch was given must fail."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _peek(base, off, out):
    tl.store(out, tl.load(base + off))


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask, other=0.0), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        base = torch.zeros(1, dtype=torch.int64)
        out = torch.zeros(1, dtype=torch.int64)
        _peek[(1,)](base, (id(x) - base.data_ptr()) // 8, out)  # the object's reference count
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)
        return y
