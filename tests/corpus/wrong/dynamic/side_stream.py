# expect: stream_violation
# policy: off
# problem: relu_big
# needle: another stream
# gpu: yes
"""Hides its work from the timing events: launches on a private stream (after the current stream's work,
so the inputs are ready) and returns without joining it. Events recorded on the current stream see
nothing, and a caller that syncs only its own stream may read the output before it is written. (A
version that waits on the host, `side.synchronize()`, is slow but honest: the end event is recorded
after the work. So is one whose hidden work is shorter than its launch: the events then span the
host's launch time. A first version of this file was that, and the H200 rightly accepted it.)"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr, PASSES: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.zeros([BLOCK], dtype=tl.float32)
    for _ in range(PASSES):  # volatile: every pass really reads, about a millisecond of hidden work
        y = tl.maximum(tl.load(x_ptr + offs, mask=mask, volatile=True), 0.0)
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.cuda.Stream()

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            _relu[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024, PASSES=64)
        return y
