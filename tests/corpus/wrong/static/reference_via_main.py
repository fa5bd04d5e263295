# expect: reference_access
# Finds the reference class in the harness's main module.
import sys

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.ref = sys.modules["__main__"].Model(*args)

    def forward(self, x):
        return self.ref(x)
