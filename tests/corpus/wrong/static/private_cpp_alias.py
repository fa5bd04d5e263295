# expect: introspection
# torch.cpp is torch._C.cpp: a public-looking name for the C++ bindings.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.bindings = torch.cpp

    def forward(self, x):
        return x.clone()
