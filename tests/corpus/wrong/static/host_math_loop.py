# expect: torch_compute
# A Python loop over the values with math functions.
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        flat = x.reshape(-1).cpu()
        vals = [math.tanh(v) for v in flat]
        return torch.tensor(vals, dtype=x.dtype).view(x.shape).to(x.device)
