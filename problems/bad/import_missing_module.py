# expect: importing it raised ModuleNotFoundError | kernelagent_no_such_module
# stage: import
import kernelagent_no_such_module  # <- here
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return kernelagent_no_such_module.op(x)


def get_inputs():
    return [torch.randn(4)]
