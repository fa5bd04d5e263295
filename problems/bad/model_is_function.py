# expect: `Model` must be a class | a function
# stage: inspect
import torch


def Model(x):  # <- here
    return x * 2


def get_inputs():
    return [torch.randn(4)]
