# expect: ctypes
# numpy.testing (not loaded by import numpy) re-exports a C-extension builder.
import numpy as np
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = np.testing.extbuild.build_and_import_extension("k", [])

    def forward(self, x):
        return x.clone()
