# expect: introspection
# sys.modules reached through torch.cuda.memory's import of sys, then indexed.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        verifier = torch.cuda.memory.sys.modules.get("kernelagent.verifier.worker.integrity")
        if verifier is not None:
            verifier.RECORD = []
        return x.clone()
