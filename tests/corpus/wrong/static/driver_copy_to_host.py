# expect: stream_creation
# Copies the input to the host through the driver on a stream of its own and computes there with NumPy:
# the op recorder sees no host read (red-team review, 2026-12-02).
import cuda.bindings.driver as cuda
import numpy as np
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        err, side = cuda.cuStreamCreate(1)
        host = np.empty(x.numel(), dtype=np.float32)
        cuda.cuMemcpyDtoHAsync(host.ctypes.data, x.data_ptr(), x.numel() * 4, side)
        cuda.cuStreamSynchronize(side)
        out = np.maximum(host, 0)
        y = torch.empty_like(x)
        cuda.cuMemcpyHtoDAsync(y.data_ptr(), out.ctypes.data, x.numel() * 4, side)
        cuda.cuStreamSynchronize(side)
        return y
