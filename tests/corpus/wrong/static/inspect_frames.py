# expect: introspection
# Reads the caller's locals.
import inspect

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        frame = inspect.currentframe()
        return frame.f_back.f_locals.get("ref_out", x)
