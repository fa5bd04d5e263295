# expect: torch_compute
# The host copy kept in a dict, then handed to NumPy.
import numpy as np
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        stash = {"host": x.cpu()}
        return torch.as_tensor(np.maximum(stash["host"], 0)).to(x.device)
