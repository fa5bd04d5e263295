# expect: introspection
# A raised exception's traceback leads to the caller's frame.
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        try:
            raise ValueError
        except ValueError as err:
            caller = err.__traceback__.tb_frame.f_back
        return caller.f_locals.get("expected", x)
