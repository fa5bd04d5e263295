# expect: torch_compute
# ModelNew inherits its forward from an innocent-looking local base class.
import torch.nn as nn
import torch.nn.functional as F


class _Base(nn.Module):
    def forward(self, x):
        return F.layer_norm(x, x.shape[-1:])


class ModelNew(_Base):
    pass
