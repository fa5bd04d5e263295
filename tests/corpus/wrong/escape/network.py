# problem: softmax
# attack: the network (TCP, UDP, unix sockets, abstract sockets)
"""Phones home to listeners the test runs in the caller: TCP and UDP on the loopback, a unix socket at a
path, an abstract unix socket; and tries an outside address. Forward is plain PyTorch."""

import os
import socket

import torch
import torch.nn as nn


def _attempts(mark):
    port = int(os.environ.get("KERNELAGENT_TEST_TCP", "9"))
    unix_path = os.environ.get("KERNELAGENT_TEST_UNIX", "/nonexistent")
    abstract = os.environ.get("KERNELAGENT_TEST_ABSTRACT", "ka-none")
    yield lambda: socket.create_connection(("127.0.0.1", port), timeout=1).sendall(mark.encode())
    yield lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(mark.encode(), ("127.0.0.1", port))
    for address in (unix_path, "\0" + abstract):
        def connect(a=address):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(1)
            s.connect(a)
            s.sendall(mark.encode())
        yield connect
    yield lambda: socket.create_connection(("192.0.2.1", 80), timeout=1)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        for attempt in _attempts(os.environ.get("KERNELAGENT_TEST_MARK", "x")):
            try:
                attempt()
            except Exception:  # noqa: BLE001
                pass

    def forward(self, x):
        return torch.softmax(x, dim=-1)
