# expect: introspection
# The module's own loader reads any file by path.
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.blob = __loader__.get_data("/proc/self/environ")

    def forward(self, x):
        return x.clone()
