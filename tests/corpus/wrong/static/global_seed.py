# expect: monkey_patch
# Fixes the RNG so the "fresh" inputs are predictable.
import torch
import torch.nn as nn

torch.manual_seed(1234)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.empty_like(x)
