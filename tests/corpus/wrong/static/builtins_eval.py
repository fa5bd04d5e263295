# expect: eval_exec
# Reaches eval through __builtins__ with a built name.
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        run = __builtins__["ev" + "al"] if isinstance(__builtins__, dict) else getattr(__builtins__, "ev" + "al")
        return run("x.clone()")
