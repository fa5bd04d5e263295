# expect: ok
# problem: softmax
# policy: on
"""Honest softmax whose launches take different constexpr paths (the interpreter runs, per launch, only lines
the compile of that launch generated): two launches per forward with different constexprs, constexpr if/else
in the kernel and in a jit helper, a conditional expression and a short-circuit `and` on constexprs, static
asserts with a constant and an f-string message, an early return, a while loop, multi-line expressions and a
multi-line decorator."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_max(x_ptr, base, n_cols, ONE_BLOCK: tl.constexpr, BLOCK: tl.constexpr):
    if ONE_BLOCK:
        offs = tl.arange(0, BLOCK)
        m = tl.max(tl.load(x_ptr + base + offs, mask=offs < n_cols, other=float("-inf")), 0)
    else:
        m = float("-inf")
        start = 0
        while start < n_cols:
            offs = start + tl.arange(0, BLOCK)
            m = tl.maximum(m, tl.max(tl.load(x_ptr + base + offs, mask=offs < n_cols,
                                             other=float("-inf")), 0))
            start += BLOCK
    return m


@triton.heuristics(
    values={"EVEN": lambda args: args["n_cols"] % args["BLOCK"] == 0},
)
@triton.jit
def softmax_kernel(x_ptr, y_ptr, row0, n_rows, n_cols, stride,
                   ONE_BLOCK: tl.constexpr, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    tl.static_assert(BLOCK >= 16, "BLOCK must be at least 16")
    tl.static_assert(BLOCK % 16 == 0, f"BLOCK={BLOCK} must be a multiple of 16")
    row = row0 + tl.program_id(0)
    if row >= n_rows:
        return
    base = row.to(tl.int64) * stride
    m = _row_max(x_ptr, base, n_cols, ONE_BLOCK, BLOCK)
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols if not (EVEN and ONE_BLOCK) else offs < BLOCK
        v = (tl.load(x_ptr + base + offs, mask=mask, other=float("-inf"))
             .to(tl.float32))
        s += tl.sum(
            tl.exp(v - m),
            0,
        )
    inv = 1.0 / s if ONE_BLOCK else (1.0
                                     / s)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + base + offs, mask=offs < n_cols, other=float("-inf"))
        tl.store(y_ptr + base + offs, tl.exp(v - m) * inv, mask=offs < n_cols)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        half = (n_rows + 1) // 2
        one = triton.next_power_of_2(n_cols)
        softmax_kernel[(half,)](x, y, 0, n_rows, n_cols, x.stride(0), ONE_BLOCK=True, BLOCK=max(one, 16))
        softmax_kernel[(n_rows - half + 1,)](x, y, half, n_rows, n_cols, x.stride(0), ONE_BLOCK=False, BLOCK=32)
        return y
