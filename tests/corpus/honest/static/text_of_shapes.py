# Shapes, dtypes, sizes and strides turned into text (f-strings, %, str(), print, repr of a loop's names) in
# forward's checks: allowed; none of them is a tensor's values.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(y_ptr + o, tl.maximum(tl.load(x_ptr + o, mask=o < n), 0.0), mask=o < n)


class ModelNew(nn.Module):
    def __init__(self, verbose: bool = False):
        super().__init__()
        self.verbose = verbose

    def forward(self, x):
        for name, t in (("input", x), ("input again", x)):
            if t.dim() == 0:
                raise ValueError(f"{name} needs a dimension, got shape {tuple(t.shape)} of {t.dtype}")
        if x.stride(-1) != 1:
            raise ValueError("strides %s are not supported (%d elements)" % (str(x.stride()), x.numel()))  # noqa: UP031
        if self.verbose:
            print("relu on", tuple(x.shape), str(x.dtype), repr(x.device), f"{x.numel():,} elements")
        y = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), B=1024)
        return y
