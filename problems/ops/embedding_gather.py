# kind: gather
"""Row gather from a float table by int32 indices, scaled by per-row float weights."""
import torch
import torch.nn as nn

vocab = 50
dim = 16
count = 24


class Model(nn.Module):
    def forward(self, table: torch.Tensor, index: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return table[index.long()] * weight[:, None]


def get_inputs():
    index = torch.randint(0, vocab, (count,), dtype=torch.int32)
    return [torch.randn(vocab, dim), index, torch.rand(count)]


def get_init_inputs():
    return []
