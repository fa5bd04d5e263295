# expect: stream_violation
# policy: off
# problem: relu_big
# needle: another stream, not the caller's
# gpu: yes
"""Runs its kernel on a private stream and joins it before returning: correct, and nothing is left
running. But the private stream does not wait for the caller's, so the kernel may start while the
caller's stream still has work queued ahead of the timing's start event (the input refresh, the L2
flush, the spin that keeps launches ahead of the GPU) and finish before the events open: the time
the events see is only the join. Every launch must be on the caller's stream."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.cuda.Stream()

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        with torch.cuda.stream(self.side):
            _relu[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        torch.cuda.current_stream().wait_stream(self.side)
        return y
