# expect: subprocess
# A module handed out by a property.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    @property
    def platform(self):
        return torch.cuda.os

    def forward(self, x):
        self.platform.posix_spawnp("true", ["true"], {})
        return x.clone()
