# expect: torch_compute
# Calls the ATen operator directly.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.ops.aten.mm.default(a, b)
