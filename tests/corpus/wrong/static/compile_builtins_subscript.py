# expect: eval_exec
# compile found by key in the builtins module reached through enum.
import enum

import torch.nn as nn

_ns = {}
enum.bltns.__dict__["comp" + "ile"]("y = 1", "<torch>", "exec")


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clone()
