# expect: nondeterministic
# policy: off
# problem: relu_big
# needle: second run
# gpu: yes
"""A write race: each output block is written by two neighbouring programs with different values
(one exact, one off by 1%); which store lands last depends on scheduling, so runs disagree."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_race(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = (pid // 2) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0)
    if pid % 2 == 0:
        y = y * 1.01
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        _relu_race[(2 * triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
