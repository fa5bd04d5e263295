# kind: loss
"""KL divergence of two categorical distributions, batch-mean reduction, log-probabilities as input."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch = 16
classes = 40


class Model(nn.Module):
    def forward(self, log_p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return F.kl_div(log_p, q, reduction="batchmean")


def get_inputs():
    log_p = torch.randn(batch, classes).log_softmax(dim=-1)
    q = torch.randn(batch, classes).softmax(dim=-1)
    return [log_p, q]


def get_init_inputs():
    return []
