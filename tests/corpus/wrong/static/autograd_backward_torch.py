# expect: torch_compute
# The forward pass is a kernel, but the gradient is computed in PyTorch.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=offs < n)


class _Relu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        ctx.save_for_backward(x)
        return y

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return torch.where(x > 0, grad, torch.zeros_like(grad))


class ModelNew(nn.Module):
    def forward(self, x):
        return _Relu.apply(x)
