# expect: stream_creation
# capture_aware.py through the stream's own method (torch.Stream.is_capturing, newer torch): asks whether a
# CUDA graph is being captured and returns its last answer then (review of 2026-12-02).
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


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.last = None

    def forward(self, x):
        x = x.contiguous()
        if torch.cuda.current_stream().is_capturing() and self.last is not None:
            return self.last
        y = torch.empty_like(x)
        _softmax[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        self.last = y
        return y
