# expect: file_io
# File objects from the io module torch.storage imports.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        with torch.storage.io.FileIO("/tmp/cached_answer", "rb") as handle:
            self.blob = handle.read()

    def forward(self, x):
        return x.clone()
