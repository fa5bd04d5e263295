# expect: policy_violation
# policy: off
# problem: softmax
# needle: starting a thread
"""PyTorch fallback moved off the calling thread: a short-lived helper thread runs torch.softmax and is
joined before forward returns (so no thread is left behind); a copy kernel runs on the caller's thread."""

import threading

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        box = {}
        helper = threading.Thread(target=lambda: box.update(y=torch.softmax(x, dim=-1)))
        helper.start()
        helper.join()
        y = torch.empty_like(x)
        _copy[(triton.cdiv(x.numel(), 256),)](box["y"], y, x.numel(), BLOCK=256)
        return y
