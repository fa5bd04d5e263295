# expect: stream_creation
# Captures the launch in a CUDA graph and replays it.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graph = None

    def forward(self, x):
        if self.graph is None:
            self.graph = torch.cuda.CUDAGraph()
            self.out = torch.empty_like(x)
            with torch.cuda.graph(self.graph):
                self.out.copy_(x)
        self.graph.replay()
        return self.out
