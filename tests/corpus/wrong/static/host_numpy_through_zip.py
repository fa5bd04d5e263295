# expect: torch_compute
# The host copy travels through zip and list before NumPy computes on it.
import numpy as np
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        pairs = list(zip([x.cpu()], [1]))
        return torch.from_numpy(np.exp(pairs[0][0]).numpy()).to(x.device)
