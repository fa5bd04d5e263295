# expect: eval_exec
# A class body sets __annotations__ by hand: dataclasses pastes each key into the text of the __init__ it
# generates and runs, so a key can carry code the file never shows as code.
import dataclasses

import torch.nn as nn


class Cfg:
    __annotations__ = {"a=(lambda: 0)()": int}


Cfg = dataclasses.dataclass(Cfg)


class ModelNew(nn.Module):
    def forward(self, x):
        return x * Cfg().a
