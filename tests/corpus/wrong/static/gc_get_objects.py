# expect: introspection
# Searches the heap for the reference's output.
import gc

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        for obj in gc.get_objects():
            if isinstance(obj, torch.Tensor) and obj.shape == x.shape and obj is not x:
                return obj
        return x
