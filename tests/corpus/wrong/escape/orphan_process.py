# problem: softmax
# attack: a process that outlives the verify
"""Leaves processes behind: a double-forked child in a session of its own, and a subprocess started in a
new session, each sleeping for minutes (the marker is in their command line and environment).
Forward is plain PyTorch."""

import os
import subprocess
import sys

import torch
import torch.nn as nn


def _double_fork(mark):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", mark])
        os._exit(0)
    os.waitpid(pid, 0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        mark = os.environ.get("KERNELAGENT_TEST_MARK", "x")
        for attempt in (lambda: _double_fork(mark),
                        lambda: subprocess.Popen(["/bin/sh", "-c", "sleep 300; true", mark], start_new_session=True,
                                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)):
            try:
                attempt()
            except Exception:  # noqa: BLE001
                pass

    def forward(self, x):
        return torch.softmax(x, dim=-1)
