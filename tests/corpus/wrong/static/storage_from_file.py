# expect: file_io
# Storage backed by a file: C++ file access with no Python open() in sight.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        store = x.untyped_storage().from_file("/tmp/leak.bin", True, 4096)
        return x.clone() if store is None else x.clone()
