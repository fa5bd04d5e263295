# expect: forbidden_import
# Rebinds __name__ so the "test block" runs on import.
import torch
import torch.nn as nn

__name__ = "__main__"


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.empty_like(x)


if __name__ == "__main__":
    import time

    time.sleep(0)
