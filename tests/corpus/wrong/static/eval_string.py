# expect: eval_exec
# Builds the call in a string.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return eval("torch.mat" + "mul")(a, b)


_ = torch
