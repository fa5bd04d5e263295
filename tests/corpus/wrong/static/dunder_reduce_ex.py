# expect: introspection
# Pickling's reconstruction hooks hand out module-level functions.
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        rebuild, args = x.__reduce_ex__(2)[:2]
        return rebuild(*args)
