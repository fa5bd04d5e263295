# expect: `Model` must subclass torch.nn.Module
# stage: import
import torch


class _Plain:
    def forward(self, x):
        return x


Model = _Plain  # <- here


def get_inputs():
    return [torch.randn(4)]
