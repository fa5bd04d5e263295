# expect: introspection
# A builtin function's __self__ is the builtins module.
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        namespace = len.__self__
        return namespace.eval("x.softmax(-1)", {"x": x})
