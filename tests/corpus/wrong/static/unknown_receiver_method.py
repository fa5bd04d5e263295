# expect: torch_compute
# A helper receives the torch module as an argument and calls it.
import torch
import torch.nn as nn


def _apply(mod, x):
    return mod.sigmoid(x)


class ModelNew(nn.Module):
    def forward(self, x):
        return _apply(torch, x)
