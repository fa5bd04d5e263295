# problem: softmax
# attack: a FIFO in place of the candidate's own source file, which the parent reads when judging (success path)
"""The parent writes the candidate's source into the work dir, and after a normal run reads it back
(once judge.verdict.decide: `"dot" in _source(cand_path)`) with a plain open + read. The worker has imported the
module by then, so the candidate replaces the file with a FIFO in its constructor and runs normally: the
parent's open blocks for ever. Forward is plain PyTorch (a real kernel would do as well)."""

import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        for name in os.listdir("."):
            if name.startswith("candidate_") and name.endswith(".py"):
                os.unlink(name)
                os.mkfifo(name)

    def forward(self, x):
        return torch.softmax(x, dim=-1)
