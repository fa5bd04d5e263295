# expect: ctypes
# Calls into a shared library.
import ctypes

import torch.nn as nn

_libc = ctypes.CDLL("libc.so.6")


class ModelNew(nn.Module):
    def forward(self, x):
        _libc.usleep(1)
        return x.clone()
