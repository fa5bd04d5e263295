# expect: env_access
# `from <allowed> import os` is the os module, whatever the name it was imported under.
import torch.nn as nn
from torch.types import os as platform_tools


class ModelNew(nn.Module):
    def forward(self, x):
        self.flag = platform_tools.environ.get("KERNELAGENT_SEED")
        return x.clone()
