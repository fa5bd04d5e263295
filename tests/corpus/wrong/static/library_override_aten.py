# expect: monkey_patch
# Registers its own implementation of aten::mm, so the reference runs the candidate's code.
import torch
import torch.nn as nn

_lib = torch.library.Library("aten", "IMPL")
_lib.impl("mm", lambda a, b: torch.zeros(a.shape[0], b.shape[1]), "CPU")


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.zeros(a.shape[0], b.shape[1], device=a.device)
