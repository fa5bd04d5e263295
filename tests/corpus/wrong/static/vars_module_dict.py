# expect: torch_compute
# vars(torch)[...] instead of an attribute.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return vars(torch)["ma" + "tmul"](a, b)
