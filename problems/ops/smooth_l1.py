# kind: loss
"""Smooth-L1 (Huber-like) loss with beta set at construction."""
import torch
import torch.nn as nn

batch = 10
dim = 30
beta = 0.5


class Model(nn.Module):
    def __init__(self, beta: float):
        super().__init__()
        self.loss = nn.SmoothL1Loss(beta=beta)

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return self.loss(pred, target)


def get_inputs():
    return [torch.randn(batch, dim), torch.randn(batch, dim)]


def get_init_inputs():
    return [beta]
