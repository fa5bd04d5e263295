"""The identity guard and torch._dynamo: workers no longer import dynamo up front, so its import may
happen while a candidate runs; the one rebinding it makes (torch.manual_seed) must not count as the
candidate's patch, and nothing that merely looks like it may pass."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = r"""
import functools, json, sys
import torch
from kernelagent.verifier.worker import guard
from kernelagent.verifier.worker.integrity import OpRecorder
orig = torch.manual_seed
snap = guard.snapshot()
out = {}
with OpRecorder():
    torch.ones(3) + 1
out["dynamo_after_dispatch"] = "torch._dynamo" in sys.modules
import torch._dynamo
out["after_import"] = guard.changed_since(snap)
dynamo_wrapper = torch.manual_seed
torch.manual_seed = functools.wraps(orig)(lambda seed: orig(seed))
out["own_wrapper"] = guard.changed_since(snap)
torch.manual_seed = torch._disable_dynamo(lambda seed: orig(seed))
out["disable_around_other"] = guard.changed_since(snap)
torch.manual_seed = dynamo_wrapper
out["restored"] = guard.changed_since(snap)
print(json.dumps(out))
"""


def test_dynamo_rebinding_is_recognised_and_nothing_else():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["dynamo_after_dispatch"] is False  # the recorder no longer drags dynamo in
    assert out["after_import"] == []  # torch's own wrapper around the same function
    assert out["own_wrapper"] == ["torch.manual_seed"]  # functools.wraps does not fool it
    assert out["disable_around_other"] == ["torch.manual_seed"]  # the right wrapper around another function
    assert out["restored"] == []
