# expect: monkey_patch
# A forward hook swaps the output after forward returns.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_forward_hook(lambda mod, inputs, out: torch.relu(inputs[0]))

    def forward(self, x):
        return torch.empty_like(x)
