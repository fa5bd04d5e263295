# expect: file_io
# Caches results with pickle.
import pickle

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        pickle.dumps(x)
        return x.clone()
