# problem: softmax
# attack: a progress.json of the wrong shape: the parent's verify() raises instead of returning a report
"""`_progress_stages` catches OSError and ValueError only; `_worker_stages` indexes each entry as a dict. A
progress.json holding `{"x": 1}` (the candidate writes it in its own -out folder, then exits) makes the
parent raise TypeError out of `verify()`: the caller (the agent loop, the CLI) gets a traceback, not a
report."""

import json
import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        with open(os.getcwd() + "-out/progress.json", "w") as f:
            json.dump({"x": 1}, f)
        os._exit(3)

    def forward(self, x):
        return torch.softmax(x, dim=-1)
