# expect: monkey_patch
# Replaces torch.allclose through sys.modules and the module dict.
import sys

import torch.nn as nn

sys.modules["torch"].__dict__["allclose"] = lambda *a, **k: True


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clone()
