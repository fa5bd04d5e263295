# expect: eval_exec
# exec taken from the builtins module dataclasses keeps a reference to.
import dataclasses

import torch.nn as nn

SOURCE = "def forward(self, x):\n    return x.softmax(-1)\n"


class ModelNew(nn.Module):
    pass


_namespace = {}
dataclasses.builtins.exec(SOURCE, _namespace)
ModelNew.forward = _namespace["forward"]
