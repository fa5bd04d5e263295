# expect: introspection
# operator.attrgetter walks a dotted path: torch.cuda.memory.sys.settrace.
import operator

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        operator.attrgetter("cuda.memory.sys.settrace")(torch)(None)
        return x.clone()
