# problem: softmax
# attack: a FIFO where the parent reads a dead worker's progress (out/progress.json)
"""The parent reads `<workdir>-out/progress.json` after a worker died (judge.verdict._progress_stages) with a
plain open + read, following whatever is there. The candidate may make FIFOs in its own folders (Landlock's
MAKE_FIFO is granted there), so it puts one there and exits: the parent's open blocks for ever, waiting for a
writer that will never come. Forward is never reached."""

import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        path = os.getcwd() + "-out/progress.json"
        try:
            os.unlink(path)
        except OSError:
            pass
        os.mkfifo(path)
        os._exit(3)

    def forward(self, x):
        return torch.softmax(x, dim=-1)
