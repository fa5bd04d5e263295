# expect: dynamic_attr
# A star import from a module without __all__ brings in the modules it imported, under bare names.
import torch.nn as nn
from triton.knobs import *  # noqa: F403


class ModelNew(nn.Module):
    def forward(self, x):
        subprocess.run(["true"])  # noqa: F405
        return x.clone()
