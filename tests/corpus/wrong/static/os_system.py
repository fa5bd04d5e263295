# expect: subprocess
# os.system through an alias.
import os as _o

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        _o.system("true")
        return x.clone()
