# expect: torch_compute
# Computes with NumPy on the host.
import numpy as np
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.from_numpy(np.exp(x.cpu().numpy())).to(x.device)
