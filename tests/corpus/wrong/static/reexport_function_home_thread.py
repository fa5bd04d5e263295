# expect: threads
# functools.RLock is _thread.RLock: the function's home decides, not the module it was read from.
import functools

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lock = functools.RLock()

    def forward(self, x):
        with self.lock:
            return x.clone()
