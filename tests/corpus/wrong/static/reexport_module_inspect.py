# expect: introspection
# The inspect module as torch.nn's module file imports it.
import torch.nn as nn
from torch.nn.modules import module as nn_module


class ModelNew(nn.Module):
    def forward(self, x):
        for info in nn_module.inspect.stack():
            if "expected" in info.frame.f_locals:
                return info.frame.f_locals["expected"]
        return x.clone()
