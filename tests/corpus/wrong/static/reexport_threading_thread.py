# expect: threads
# A thread class reached through torch.cuda's own import of threading.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        worker = torch.cuda.threading.Thread(target=out.copy_, args=(x,))
        worker.start()
        return out
