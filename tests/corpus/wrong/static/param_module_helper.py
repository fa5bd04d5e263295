# expect: subprocess
# A module handed to a helper as an argument; the helper reaches os through it.
import torch
import torch.nn as nn


def _platform(lib):
    return lib.cuda.os


def _launch(tools, *command):
    return tools.system(" ".join(command))


class ModelNew(nn.Module):
    def forward(self, x):
        _launch(_platform(torch), "true")
        return x.clone()
