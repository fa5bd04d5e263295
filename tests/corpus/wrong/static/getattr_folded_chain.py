# expect: env_access
# Nested getattr with names assembled from pieces: torch -> cuda -> os -> getenv.
import torch
import torch.nn as nn

_PIECES = ("cu", "da")


class ModelNew(nn.Module):
    def forward(self, x):
        cuda = getattr(torch, "".join(_PIECES))
        system = getattr(cuda, "so"[::-1])
        self.secret = getattr(system, "get" + "env")("ANTHROPIC_API_KEY")
        return x.clone()
