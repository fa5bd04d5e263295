# expect: introspection
# A generator's frame leads to the frames that are running it.
import torch.nn as nn


def _probe():
    yield None


class ModelNew(nn.Module):
    def forward(self, x):
        gen = _probe()
        next(gen)
        caller = gen.gi_frame.f_back
        while caller is not None and "reference" not in caller.f_locals:
            caller = caller.f_back
        return x.clone() if caller is None else caller.f_locals["reference"]
