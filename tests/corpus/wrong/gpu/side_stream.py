# expect: stream_violation (policy off) / policy_violation (policy on)
# The kernel runs on a private stream, never joined to the current one: events there see nothing.
import torch
import torch.nn as nn
import triton
import triton.language as tl

_side = None


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr, PASSES: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.zeros([BLOCK], dtype=tl.float32)
    for _ in range(PASSES):  # volatile re-reads: about a millisecond the timing events must not miss
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"), volatile=True).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        global _side
        if _side is None:
            _side = torch.cuda.Stream()
        y = torch.empty_like(x)
        _side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(_side):
            softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]),
                                          PASSES=1024)
        return y
