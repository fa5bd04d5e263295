# expect: compile_error
# problem: softmax
# policy: on
# needle: constexpr global
"""Red team round 10 (2026-12-03, accepted on 11 trials with the policy on): a global constexpr set from the
type @triton.jit returns (InterpretedFunction here, JITFunction in the AOT compile) guards a branch in which the
kernel turns its block into text and computes the softmax in Python; compiled, the branch is dropped and the
kernel copies. Kernel code may turn a block into text only inside print now (device_print when compiled), no
list comprehension or other Python beside the kernel runs during an interpreted launch, and (round 11, which
computed the same branch with operators alone) the constexpr globals a kernel reads must be the same in the AOT
compile as when it ran: that check names it first."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _probe(x_ptr):
    pass


INTERP = tl.constexpr(type(_probe).__name__ == "InterpretedFunction")


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n_cols
    v = tl.load(x_ptr + row * stride + offs, mask=m, other=float("-inf"))
    out = v
    if INTERP:
        out = v * 0.0
        for vals in [[float(w) for w in str(v).replace("[", " ").replace("]", " ").split()]]:
            for top in [max(vals)]:
                for ex in [[2.718281828459045 ** (a - top) for a in vals]]:
                    for s in [sum(ex)]:
                        for j in range(BLOCK):
                            out = out + (offs == j).to(tl.float32) * (ex[j] / s)
    tl.store(y_ptr + row * stride + offs, out, mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), BLOCK=triton.next_power_of_2(n_cols))
        return y
