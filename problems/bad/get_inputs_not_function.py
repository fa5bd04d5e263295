# expect: `get_inputs` must be a function | got list
# stage: call
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x


get_inputs = [torch.randn(4)]
