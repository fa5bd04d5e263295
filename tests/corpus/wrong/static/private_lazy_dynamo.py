# expect: introspection
# A private submodule that torch loads lazily, named from its public parent.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        torch._dynamo.config.suppress_errors = True

    def forward(self, x):
        return x.clone()
