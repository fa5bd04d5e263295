# expect: introspection
# sys._getframe reaches the harness's frame.
import sys

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return sys._getframe(2).f_locals.get("expected", x)
