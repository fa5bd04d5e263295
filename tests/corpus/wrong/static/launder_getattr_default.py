# expect: env_access
# getattr's default is what comes back when the name is missing.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        env = getattr(torch, "no_such_name", torch.cuda.os).environ
        self.home = env.get("HOME")
        return x.clone()
