# expect: stream_creation
# Creates a raw driver stream for a CuTe launch.
import cuda.bindings.driver as cuda
import cutlass.cute as cute
import torch
import torch.nn as nn


@cute.jit
def _noop(m: cute.Tensor, stream: cuda.CUstream):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        err, stream = cuda.cuStreamCreate(0)
        _noop(x, stream)
        return torch.empty_like(x)
