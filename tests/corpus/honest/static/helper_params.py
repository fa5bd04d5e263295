"""Row-wise scale: kernels and options handed to helpers as arguments, a launcher bound with
functools.partial, and an op registered through a small helper (the library's style)."""

import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale_rows_kernel(x_ptr, s_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    s = tl.load(s_ptr + row)
    x = tl.load(x_ptr + row * stride + cols, mask=mask)
    tl.store(out_ptr + row * stride + cols, x * s, mask=mask)


def _launch(kernel, x: torch.Tensor, s: torch.Tensor, num_warps: int) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    rows, cols = x.shape
    kernel[(rows,)](x, s.contiguous(), out, cols, x.stride(0), BLOCK=triton.next_power_of_2(cols),
                    num_warps=num_warps)
    return out


_scale_rows = functools.partial(_launch, _scale_rows_kernel, num_warps=4)


def _impl(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return _scale_rows(x, s)


def _fake(x, s):
    return torch.empty_like(x)


def _register(name: str, impl, fake):
    if hasattr(torch.ops.kernelagent_demo, name):
        return getattr(torch.ops.kernelagent_demo, name)
    op = torch.library.custom_op(f"kernelagent_demo::{name}", impl, mutates_args=())
    op.register_fake(fake)
    return op


scale_rows = _register("scale_rows", _impl, _fake)


class ModelNew(nn.Module):
    def forward(self, x, s):
        return scale_rows(x, s)
