# expect: subprocess
# A structural pattern captures the module under a new name.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        match (torch.cuda, x):
            case (lib, _):
                lib.os.system("true")
        return x.clone()
