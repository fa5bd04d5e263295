# expect: introspection
# A bound method's function and its module globals.
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        env = self.forward.__func__.__globals__
        env["torch"].manual_seed(0)
        return x.clone()
