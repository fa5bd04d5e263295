# problem: softmax
# attack: gigabytes to stdout
# floods: yes
"""Writes 1 GiB to stdout and 128 MiB to stderr, as fast as the pipes take it, to make the caller hold
it all in memory. Forward is plain PyTorch."""

import os

import torch
import torch.nn as nn

CHUNK = b"flood " * (1 << 17)  # 768 KiB


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        for fd, total in ((1, 1 << 30), (2, 1 << 27)):
            written = 0
            while written < total:
                written += os.write(fd, CHUNK)

    def forward(self, x):
        return torch.softmax(x, dim=-1)
