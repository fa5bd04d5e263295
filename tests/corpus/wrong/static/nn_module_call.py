# expect: torch_compute
# Keeps an nn.Linear and calls it.
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)

    def forward(self, x):
        return self.fc(x)
