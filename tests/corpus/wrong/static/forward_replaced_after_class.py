# expect: torch_compute
# The class looks empty; its forward is swapped for a PyTorch function after the definition.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.empty_like(x)


setattr(ModelNew, "forward", lambda self, x: torch.relu(x))
