"""Causal self-attention written as a user might: SDPA over (B, S, H, D) tensors transposed to its layout and
back. The library's attention reference takes `causal` beside q, k, v; its MATCH_PRESETS lets the offline match
find it (with causal=True bound)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, q, k, v):
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                             is_causal=True)
        return out.transpose(1, 2)


def get_inputs():
    return [torch.randn(1, 48, 2, 64, dtype=torch.bfloat16) for _ in range(3)]


def get_init_inputs():
    return []
