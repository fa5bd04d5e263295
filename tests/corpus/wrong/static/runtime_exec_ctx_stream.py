# expect: stream_creation
# A stream from the runtime's execution-context API, which no stream-creation name lists: the bindings are
# allowed only for the CUstream type (red-team review, 2026-12-02).
import cuda.bindings.runtime as cudart
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        err, ctx = cudart.cudaDeviceGetExecutionCtx(0)
        err, side = cudart.cudaExecutionCtxStreamCreate(ctx, 1, 0)
        return torch.relu(x)
