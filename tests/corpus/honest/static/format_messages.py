# str.format with plain fields (positional, named, with format specs) in a shape check's message, from a
# conditional template and through the unbound str.format: allowed (only fields that walk attributes or items,
# `{0.attr}` / `{0[key]}`, or a template the policy cannot read, are refused).
import torch
import torch.nn as nn
import triton
import triton.language as tl

_SHAPE_ERROR = "expected a 2-D input, got {} dims of sizes {sizes}"


@triton.jit
def _scale(x_ptr, y_ptr, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(y_ptr + o, 2.0 * tl.load(x_ptr + o, mask=o < n), mask=o < n)


class ModelNew(nn.Module):
    def forward(self, x):
        if x.dim() != 2:
            raise ValueError(_SHAPE_ERROR.format(x.dim(), sizes=tuple(x.shape)))
        if x.dtype not in (torch.float32, torch.bfloat16):
            kind = ("complex input {}" if x.is_complex() else "unsupported dtype {}").format(x.dtype)
            raise TypeError(str.format("{}: use float32 or bfloat16", kind))
        if x.numel() > 2**31:
            raise ValueError("{:>12,} elements is more than {:.1e}".format(x.numel(), 2.0**31))  # noqa: UP032
        y = torch.empty_like(x)
        _scale[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), B=1024)
        return y
