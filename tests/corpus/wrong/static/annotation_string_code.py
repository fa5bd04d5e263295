# expect: eval_exec
# A string annotation that is code: torch.library evaluates it when it infers the op's schema.
import torch
import torch.nn as nn


@torch.library.custom_op("kernelagent_demo::noop", mutates_args=())
def noop(x: "__import__('os').system('true') or torch.Tensor") -> torch.Tensor:
    return x.clone()


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clone()
