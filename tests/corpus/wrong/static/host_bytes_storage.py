# expect: torch_compute
# The input's raw bytes read into Python through its storage, the answer computed with math, copied in.
import math

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        vals = memoryview(bytes(x.contiguous().untyped_storage())).cast("f")
        return torch.tensor([max(v, 0.0) for v in vals]).view(x.shape) * math.e / math.e
