# expect: policy_violation
# policy: off
# problem: softmax
# needle: threads
"""A persistent worker thread launches the kernels; forward hands it the job and waits. The result is
correct, so only the thread count can reject this file."""

import queue
import threading

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


def _serve(jobs):
    while True:
        x, y, done = jobs.get()
        _softmax[(x.shape[0],)](x, y, x.stride(0), x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        done.set()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.jobs = queue.Queue()
        threading.Thread(target=_serve, args=(self.jobs,), name="kernel-server", daemon=True).start()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        done = threading.Event()
        self.jobs.put((x, y, done))
        done.wait()
        return y
