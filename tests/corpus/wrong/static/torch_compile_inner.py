# expect: torch_compute
# torch.compile generates the kernel from PyTorch code.
import torch
import torch.nn as nn


def _impl(x):
    return torch.nn.functional.gelu(x)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fn = torch.compile(_impl)

    def forward(self, x):
        return self.fn(x)
