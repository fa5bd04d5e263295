# expect: subprocess
# operator.methodcaller calls a method by name on a module.
import operator

import torch.nn as nn
from torch.cuda import memory


class ModelNew(nn.Module):
    def forward(self, x):
        operator.methodcaller("system", "true")(memory.sys.modules["os"])
        return x.clone()
