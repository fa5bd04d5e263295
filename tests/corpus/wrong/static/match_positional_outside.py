# expect: dynamic_attr
# A positional class pattern on a class from outside reads whatever its __match_args__ names.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        match x:
            case torch.Tensor(first):
                return first
        return x
