# expect: runtime_error
# policy: off
# problem: softmax
# needle: ran during the launch
# (Red team round 10, 2026-12-03: on CPU the mode's __torch_function__ runs during the interpreted launch (the
# interpreter copies the arguments with torch ops), which is refused before the mode-stack check sees it.)
"""(Red team, 2026-12-01.) Policy off. Class: a TorchFunctionMode pushed in __init__ and never popped. Nothing checks the torch-function
mode stack after the constructor, so the mode sees the verifier's OWN tensor calls outside forward: the
clone of every trial input (tensorio.clone_leaves) and the copy_ that refills buffers (cache probe; on a GPU
the timed draws, Refresher.fill, outside the timed region). At those moments it computes softmax with
PyTorch, no op recorder active, and keys the answer by the buffer's address; forward copies it out with a
Triton kernel."""

import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.overrides import TorchFunctionMode


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class _Spy(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.answers, self.in_forward = {}, False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.in_forward:
            return out
        name = getattr(func, "__name__", "")
        if name == "clone" and isinstance(out, torch.Tensor) and out.dim() == 2 and out.is_floating_point():
            self.answers[out.data_ptr()] = torch.softmax(out, dim=-1)
        elif name == "copy_" and isinstance(args[0], torch.Tensor) and args[0].dim() == 2:
            self.answers[args[0].data_ptr()] = torch.softmax(args[0], dim=-1)
        return out


class _Pass(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.spy = _Spy()
        self.spy.__enter__()  # never exited
        # the worker builds the model inside `with torch.device(...)`, whose exit pops the TOP mode: give it one
        _Pass().__enter__()

    def forward(self, x):
        self.spy.in_forward = True
        try:
            ans = self.spy.answers[x.data_ptr()]
            y = torch.empty_like(x)
            _copy[(triton.cdiv(x.numel(), 256),)](ans, y, x.numel(), BLOCK=256)
            return y
        finally:
            self.spy.in_forward = False
