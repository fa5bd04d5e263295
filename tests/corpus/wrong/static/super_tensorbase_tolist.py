# expect: introspection
# super(torch.Tensor, x).tolist() reaches TensorBase.tolist, which the worker cannot wrap (a C type).
import math

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        rows = super(torch.Tensor, x.float().cpu()).tolist()
        out = []
        for r in rows:
            m = max(r)
            e = [math.exp(v - m) for v in r]
            out.append([v / sum(e) for v in e])
        return x.new_tensor(out)
