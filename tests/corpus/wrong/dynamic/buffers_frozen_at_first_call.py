# expect: mismatch
# problem: ../ops/batch_norm_eval
# needle: seed 1
# (red team, 2026-12-05) Batch norm with the running statistics cloned at the first call and used ever after: later seeds re-initialised parameters only, never buffers (accepted on 5 trials). Floating buffers are now rescaled too.
"""Inference batch norm whose kernel reads the first call's copies of the running mean and variance."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bn_kernel(x_ptr, y_ptr, mean_ptr, var_ptr, w_ptr, b_ptr, n, C, HW, eps, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = offs < n
    c = (offs // HW) % C
    x = tl.load(x_ptr + offs, mask=keep, other=0.0)
    mu = tl.load(mean_ptr + c, mask=keep, other=0.0)
    var = tl.load(var_ptr + c, mask=keep, other=1.0)
    w = tl.load(w_ptr + c, mask=keep, other=0.0)
    b = tl.load(b_ptr + c, mask=keep, other=0.0)
    tl.store(y_ptr + offs, (x - mu) / tl.sqrt(var + eps) * w + b, mask=keep)


class ModelNew(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.register_buffer("running_mean", torch.zeros(channels))
        self.register_buffer("running_var", torch.ones(channels))
        self.frozen = []

    def forward(self, x):
        if not self.frozen:
            self.frozen.append(self.running_mean.detach().clone())
            self.frozen.append(self.running_var.detach().clone())
        x = x.contiguous()
        y = torch.empty_like(x)
        n, c, hw = x.numel(), x.shape[1], x.shape[2] * x.shape[3]
        bn_kernel[(triton.cdiv(n, 256),)](x, y, self.frozen[0], self.frozen[1], self.weight, self.bias, n, c, hw,
                                          1e-5, BLOCK=256)
        return y
