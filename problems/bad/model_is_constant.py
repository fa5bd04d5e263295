# expect: `Model` must be a class | `None`
# stage: inspect
import torch

Model = None  # <- here


def get_inputs():
    return [torch.randn(4)]
