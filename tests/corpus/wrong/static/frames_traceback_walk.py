# expect: introspection
# An exception's traceback leads to the caller's frame and its locals.
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        try:
            raise LookupError
        except LookupError as err:
            tb = getattr(err, "__trace" + "back__")
            outer = tb.tb_frame.f_back
        return outer.f_locals.get("expected", x)
