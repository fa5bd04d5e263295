# expect: threads
# A banned module taken out of an allowed module's namespace by key.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        runner = torch.cuda.__dict__["thread" + "ing"].Timer(0.0, print)
        runner.start()
        return x.clone()
