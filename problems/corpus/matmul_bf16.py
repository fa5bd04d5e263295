"""A small bf16 matmul (test problem): tl.dot on bf16 operands must work under the interpreter too."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(64, 96, dtype=torch.bfloat16), torch.randn(96, 48, dtype=torch.bfloat16)]


def get_init_inputs():
    return []


def get_test_inputs():
    return [[torch.randn(17, 40, dtype=torch.bfloat16), torch.randn(40, 33, dtype=torch.bfloat16)]]
