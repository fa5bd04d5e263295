# expect: introspection
# A module taken out of a generator with next().
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        interp = next(m for m in (torch.cuda.memory.sys,) if m)
        interp.settrace(None)
        return x.clone()
