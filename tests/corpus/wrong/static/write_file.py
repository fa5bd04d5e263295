# expect: file_io
# Stores outputs on disk between runs.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        with open("/tmp/last_input.txt", "w") as fh:
            fh.write(str(x.shape))
        return x.clone()
