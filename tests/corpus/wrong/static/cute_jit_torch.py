# expect: torch_compute
# PyTorch called inside a @cute.jit host function runs at trace time, on every call.
import cutlass.cute as cute
import torch
import torch.nn as nn


@cute.jit
def _host(x):
    return torch.softmax(x, -1)


class ModelNew(nn.Module):
    def forward(self, x):
        return _host(x)
