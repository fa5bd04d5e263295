"""Construction patterns the deferred-code rule must leave alone (red team round 7, 2026-12-03, found them
refused): modules from generator expressions (nn.Sequential(*...), nn.ModuleList(...)), parameters from
list(map(...)), an initialiser given to Module.apply, list(filter(...)) over parameters, a generator
expression bound to a local and consumed by tuple(), a helper that returns a builder called at once."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * s, mask=mask)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = nn.Linear(d, d)
        nn.init.zeros_(self.proj.bias)


def _init_weights(m):
    if isinstance(m, nn.Linear):
        nn.init.ones_(m.weight)


def _make_weight(d):
    w = torch.randn(d, d)
    return w / d ** 0.5


def _nonzero(p):
    return p.abs().sum() > 0


def _builder(kind):
    def cosine(n):
        return torch.cos(torch.arange(n, dtype=torch.float32))
    return cosine if kind == "cos" else None


class ModelNew(nn.Module):
    def __init__(self, d: int = 4, depth: int = 2):
        super().__init__()
        self.stack = nn.Sequential(*(Block(d) for _ in range(depth)))
        self.blocks = nn.ModuleList(Block(d) for _ in range(depth))
        self.ws = nn.ParameterList(list(map(nn.Parameter, map(_make_weight, (d, 2 * d)))))
        self.apply(_init_weights)
        self.live = list(filter(_nonzero, self.parameters()))
        gen = (p.detach().abs().sum() for p in self.parameters())
        self.norms = tuple(gen)
        self.register_buffer("table", _builder("cos")(d))
        self.scale = 2.0

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        _scale_kernel[(triton.cdiv(n, 1024),)](x, out, n, self.scale, BLOCK=1024)
        return out
