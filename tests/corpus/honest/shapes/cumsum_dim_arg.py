"""Cumulative sum along a dimension passed to forward as an int."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cumsum_kernel(x_ptr, y_ptr, n, stride_line, stride_elem, BLOCK: tl.constexpr):
    line = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + line * stride_line + offs * stride_elem, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + line * stride_line + offs * stride_elem, tl.cumsum(x, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, dim: int) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        other = 1 - dim  # 2-D inputs: the dimension that is not scanned
        cumsum_kernel[(x.shape[other],)](x, y, x.shape[dim], x.stride(other), x.stride(dim),
                                         BLOCK=triton.next_power_of_2(x.shape[dim]))
        return y
