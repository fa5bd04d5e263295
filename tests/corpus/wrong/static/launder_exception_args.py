# expect: introspection
# A module carried inside an exception: its value is unknown where it is caught, but `.sys` gives it away.
import typing

import torch.nn as nn


class _Carrier(Exception):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        try:
            raise _Carrier(typing)
        except _Carrier as err:
            err.args[0].sys.settrace(None)
        return x.clone()
