# expect: introspection
# From any object to every class in the process through the class hierarchy.
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        for cls in ().__class__.__base__.__subclasses__():
            if cls.__name__ == "ReferenceRunner":
                return cls.last_output
        return x.clone()
