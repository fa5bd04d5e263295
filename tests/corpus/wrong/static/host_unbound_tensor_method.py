# expect: torch_compute
# The tensor method called through its class: torch.Tensor.tolist(x) copies values to the host.
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        rows = torch.Tensor.tolist(x.cpu())
        out = [[math.exp(v) for v in row] for row in rows]
        return torch.tensor(out, device=x.device)
