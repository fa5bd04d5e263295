# expect: env_access
# Reads a variable the harness might set.
import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        if os.environ.get("KERNELAGENT_TIMING"):
            return torch.empty_like(x)
        return x.clone()
