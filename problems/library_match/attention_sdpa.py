"""Causal attention as most PyTorch code writes it: F.scaled_dot_product_attention on (B, H, S, D) tensors. The
library's attention entry matches it with its preset layout="bhsd", causal=True."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def get_inputs():
    return [torch.randn(1, 2, 48, 64, dtype=torch.bfloat16) for _ in range(3)]


def get_init_inputs():
    return []
