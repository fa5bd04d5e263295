# expect: dynamic_import
# Loads the problem module by name.
import importlib

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ref = importlib.import_module("op").Model()

    def forward(self, x):
        return self.ref(x)
