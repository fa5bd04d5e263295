# expect: caching_detected|mismatch|timing_violation|nondeterministic|fallback_to_reference
# policy: off
# problem: softmax_timing
# needle: cache
# gpu: yes
"""Keeps a fingerprint of 256 sampled input elements on the GPU (gathered by its own kernel) and returns
the remembered answer when the samples match. (On the H200, 2026-12-01, it is stopped earlier: comparing
the samples means reading them on the host, over half of a small trial's input.)"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _softmax[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


@triton.jit
def _gather(x_ptr, idx_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(out_ptr + i, tl.load(x_ptr + tl.load(idx_ptr + i)))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = None
        self.answer = None

    def forward(self, x):
        n = x.numel()
        idx = torch.tensor([i * max(1, n // 256) % n for i in range(256)], device=x.device)
        probe = torch.empty(256, device=x.device, dtype=x.dtype)
        _gather[(1,)](x, idx, probe, N=256)
        key = probe.cpu().numpy().tobytes()
        if key != self.seen or self.answer is None or self.answer.shape != x.shape:
            self.seen, self.answer = key, softmax(x)
        return self.answer
