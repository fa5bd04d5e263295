# expect: subprocess
# triton's settings module imports subprocess; reached from there.
import torch.nn as nn
import triton


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        triton.knobs.subprocess.run(["true"], check=False)

    def forward(self, x):
        return x.clone()
