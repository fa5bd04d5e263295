# expect: subprocess
# Shells out.
import subprocess

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        subprocess.run(["nvidia-smi"], check=False)
        return x.clone()
