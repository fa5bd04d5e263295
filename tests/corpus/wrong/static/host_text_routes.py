# expect: torch_compute
# Other ways to turn tensors into text: %-formatting of a tuple, repr through map, the unbound __format__, a
# bound __repr__ taken as a value, str.format and print into a buffer of the candidate's own.
import torch
import torch.nn as nn


class Sink:
    def __init__(self):
        self.parts = []

    def write(self, text):
        self.parts.append(text)


class ModelNew(nn.Module):
    def forward(self, x):
        a = "%s|%s" % (x[0], x[1])
        b = "|".join(map(repr, x))
        c = torch.Tensor.__format__(x, "")
        show = x.__repr__
        d = "{}".format(x.T)
        sink = Sink()
        print(x, file=sink)
        text = a + b + c + show() + d + "".join(sink.parts)
        return torch.full_like(x, float(len(text)))
