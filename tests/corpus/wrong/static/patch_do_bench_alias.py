# expect: monkey_patch
# Patches triton's benchmark helper through an alias of the module.
import triton.testing as tt
import torch.nn as nn

tt.do_bench = lambda fn, *a, **k: 0.001


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clone()
