# expect: torch_compute
# The name is assembled from character codes.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        name = "".join(map(chr, [109, 97, 116, 109, 117, 108]))
        return getattr(torch, name)(a, b)
