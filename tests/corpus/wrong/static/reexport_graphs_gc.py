# expect: introspection
# The garbage collector as torch.cuda.graphs imports it, used to find the reference's output.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        for obj in torch.cuda.graphs.gc.get_objects():
            if isinstance(obj, torch.Tensor) and obj.shape == x.shape and obj is not x:
                return obj
        return x.clone()
