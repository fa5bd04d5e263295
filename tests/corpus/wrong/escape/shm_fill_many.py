# problem: softmax
# attack: filling RAM-backed scratch with many small files
# fills: yes
"""Creates tens of thousands of tiny files in its work dir: each costs memory in /dev/shm, and counting
them costs the caller time. Forward is plain PyTorch."""

import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        os.makedirs("many", exist_ok=True)
        for i in range(60_000):
            try:
                with open(f"many/{i}", "w") as f:
                    f.write("x")
            except OSError:
                break

    def forward(self, x):
        return torch.softmax(x, dim=-1)
