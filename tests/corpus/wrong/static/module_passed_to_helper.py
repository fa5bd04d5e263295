# expect: torch_compute
# The functional module travels through a dict of settings to a helper.
import torch.nn as nn
import torch.nn.functional as F

_SETTINGS = {"lib": F, "dim": -1}


def _run(cfg, x):
    lib = cfg["lib"]
    return lib.softmax(x, cfg["dim"])


class ModelNew(nn.Module):
    def forward(self, x):
        return _run(_SETTINGS, x)
