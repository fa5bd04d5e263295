# expect: fallback_to_reference
# policy: on
# problem: ../ops/layer_norm_backward
# needle: aten.add
"""(Red team, 2026-12-03: accepted on 5 trials.) A BACKWARD problem whose weight and bias gradients the
autograd engine sums: forward hands the Function one view of the weight and one of the bias per row, and
backward returns one row's share for each, so the engine adds them up (aten.add in the backward, the
allowance the engine's own sums get). The allowance was one sum per leaf of the candidate's model, and 64
unused parameters of its own bought room for all of them. Now only leaves that received a gradient and that
the reference differentiates too are counted."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _ln_fwd(x_ptr, w_ptr, b_ptr, y_ptr, m_ptr, r_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + row * n + offs, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n
    d = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + row * n + offs, d * rstd * w + b, mask=mask)
    tl.store(m_ptr + row, mean)
    tl.store(r_ptr + row, rstd)


@triton.jit
def _ln_bwd(x_ptr, w_ptr, g_ptr, m_ptr, r_ptr, dx_ptr, gx_ptr, n, BLOCK: tl.constexpr):
    # dx, and per row g * xhat (its column sums, the weight's gradient, are left to the autograd engine)
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + row * n + offs, mask=mask, other=0.0)
    g = tl.load(g_ptr + row * n + offs, mask=mask, other=0.0)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0)
    mean = tl.load(m_ptr + row)
    rstd = tl.load(r_ptr + row)
    xhat = tl.where(mask, (x - mean) * rstd, 0.0)
    gw = g * w
    c1 = tl.sum(gw * xhat, axis=0) / n
    c2 = tl.sum(gw, axis=0) / n
    tl.store(dx_ptr + row * n + offs, (gw - xhat * c1 - c2) * rstd, mask=mask)
    tl.store(gx_ptr + row * n + offs, g * xhat, mask=mask)


class _LN(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b, *views):
        rows, n = x.shape
        y = torch.empty_like(x)
        mean = x.new_empty(rows)
        rstd = x.new_empty(rows)
        _ln_fwd[(rows,)](x, w, b, y, mean, rstd, n, 1e-5, BLOCK=triton.next_power_of_2(n))
        ctx.save_for_backward(x, w, mean, rstd)
        return y

    @staticmethod
    def backward(ctx, g):
        x, w, mean, rstd = ctx.saved_tensors
        rows, n = x.shape
        g = g.contiguous()
        dx = torch.empty_like(x)
        gx = torch.empty_like(x)
        _ln_bwd[(rows,)](x, w, g, mean, rstd, dx, gx, n, BLOCK=triton.next_power_of_2(n))
        # one row per view of the weight and of the bias: the engine sums them into the parameters' gradients
        return (dx, None, None, *gx.unbind(0), *g.unbind(0))


class ModelNew(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5)
        self.spare = nn.ParameterList([nn.Parameter(torch.zeros(1)) for _ in range(64)])

    def forward(self, x):
        x = x.contiguous()
        rows = x.shape[0]
        ws = [self.norm.weight.view(-1) for _ in range(rows)]
        bs = [self.norm.bias.view(-1) for _ in range(rows)]
        return _LN.apply(x, self.norm.weight.detach(), self.norm.bias.detach(), *ws, *bs)
