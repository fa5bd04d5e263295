# expect: subprocess
# A module kept in a table and used from there.
import torch
import torch.nn as nn

_TOOLS = {"platform": torch.cuda.os, "math": torch.nn.functional.math}


class ModelNew(nn.Module):
    def forward(self, x):
        _TOOLS["platform"].system("true")
        return x.clone()
