# expect: introspection
# A function's code object re-labelled with a library's file name.
import torch.nn as nn


def _compute(x):
    return x.softmax(-1)


_relabelled = _compute.__code__.replace(co_filename="/usr/lib/python3/functools.py")


class ModelNew(nn.Module):
    def forward(self, x):
        return type(_compute)(_relabelled, {})(x)
