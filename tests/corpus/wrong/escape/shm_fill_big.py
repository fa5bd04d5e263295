# problem: softmax
# attack: filling RAM-backed scratch with big files
# fills: yes
"""Its work dir lives in /dev/shm, which is memory: writes files there until far past the worker's
memory limit, slowly enough that the watchdog sees it grow. Forward is plain PyTorch."""


import torch
import torch.nn as nn

BLOCK = b"\1" * (64 << 20)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        for i in range(96):  # 6 GiB
            try:
                with open(f"fill_{i}.bin", "wb") as f:
                    f.write(BLOCK)
            except OSError:
                break

    def forward(self, x):
        return torch.softmax(x, dim=-1)
