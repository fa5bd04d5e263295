# expect: introspection
# A module's namespace read as a dict with .get: what comes out of it is not visible.
import typing

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        interpreter = typing.__dict__.get("s" + "ys")
        interpreter.modules.pop("kernelagent", None)
        return x.clone()
