# expect: network
# Sends data out.
import socket

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        s = socket.socket()
        s.connect(("10.0.0.1", 9000))
        return x.clone()
