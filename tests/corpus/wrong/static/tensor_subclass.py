# expect: tensor_subclass
# A lazy tensor that computes only when the checker looks at it.
import torch
import torch.nn as nn


class _Lazy(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


class ModelNew(nn.Module):
    def forward(self, x):
        return x.as_subclass(_Lazy)
