# expect: subprocess
# A process started through the os module that torch.cuda imports for itself.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        if torch.cuda.os.fork() == 0:
            torch.cuda.os._exit(0)
        return x.clone()
