# problem: bucketize_rows
"""An honest per-row search that relies on each row of boundaries being sorted (it counts the boundaries below
each value): the swap trial, which exchanges values across rows, must not reject it (red team, 2026-12-05)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def count_below(b_ptr, v_ptr, o_ptr, width, queries, BW: tl.constexpr, BQ: tl.constexpr):
    row = tl.program_id(0)
    cw = tl.arange(0, BW)
    cq = tl.arange(0, BQ)
    b = tl.load(b_ptr + row * width + cw, mask=cw < width, other=float("inf"))
    v = tl.load(v_ptr + row * queries + cq, mask=cq < queries, other=0.0)
    below = tl.sum((b[None, :] < v[:, None]).to(tl.int64), axis=1)
    tl.store(o_ptr + row * queries + cq, below, mask=cq < queries)


class ModelNew(nn.Module):
    def forward(self, boundaries, values):
        boundaries, values = boundaries.contiguous(), values.contiguous()
        rows, width = boundaries.shape
        out = torch.empty(values.shape, device=values.device, dtype=torch.int64)
        count_below[(rows,)](boundaries, values, out, width, values.shape[1], BW=triton.next_power_of_2(width),
                             BQ=triton.next_power_of_2(values.shape[1]))
        return out
