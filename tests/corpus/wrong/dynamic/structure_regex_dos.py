# expect: no_kernel_launched
# policy: on
# problem: softmax
# needle: launched none
"""An output whose dict key is "Tensor(" 60 000 times with no ")": the judge's structure skeleton used a
regex that scanned to the end from every "Tensor(" (quadratic), keeping the verifier parent busy 95 s
for this file and hours for ten times the key (red-team review, 2026-12-03). Now linear."""

import torch.nn as nn

N = 60000


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {"Tensor(" * N: 0}
