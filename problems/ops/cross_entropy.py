# kind: loss
"""Mean cross-entropy of float logits against int64 class targets (the targets must stay integer)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch = 32
num_classes = 10


class Model(nn.Module):
    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)


def get_inputs():
    return [torch.randn(batch, num_classes), torch.randint(0, num_classes, (batch,))]


def get_init_inputs():
    return []
