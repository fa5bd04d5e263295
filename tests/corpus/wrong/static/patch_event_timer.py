# expect: monkey_patch
# Replaces the CUDA event timer with a constant, through setattr.
import torch
import torch.nn as nn


def _fast(self, end):
    return 0.001


setattr(torch.cuda.Event, "elapsed_time", _fast)


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clone()
