# expect: threads
# Finishes the work on a background thread after forward returns.
import threading

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        threading.Thread(target=lambda: out.copy_(x)).start()
        return out
