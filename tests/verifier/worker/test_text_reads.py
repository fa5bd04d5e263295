"""A tensor turned into text inside forward is a host read of its values, and a single value read into Python
is one scalar read whatever the dispatch-mode stack holds: torch's printer runs with the modes off, so the op
recorder saw nothing (red team, 2026-12-03: softmax computed in `math` from str(x[i, j].view(torch.int32)),
accepted). Run in a child process: the counters wrap torch's own functions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

CHILD = r'''
import io, json, operator
import torch
from torch.utils._python_dispatch import _disable_current_modes
from kernelagent.verifier.worker import guard, integrity
from kernelagent.verifier.worker.integrity import OpRecorder
integrity.count_host_reads()
snap = guard.snapshot()
x = torch.randn(16, 16)
one = x[3, 4]

def counted(fn):
    rec = OpRecorder()
    with rec:
        fn()
    return [rec.transfers.host_read_bytes, rec.transfers.scalar_reads]

def modes_off(fn):
    def run():
        with _disable_current_modes():
            fn()
    return run

class Loud(torch.Tensor):  # a subclass whose item() reads every element through aten itself
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.Tensor.item:
            for v in args[0].reshape(-1):
                torch.ops.aten._local_scalar_dense(v.as_subclass(torch.Tensor))
            return 0.0
        return super().__torch_function__(func, types, args, kwargs or {})

loud = torch.randn(8).as_subclass(Loud)

routes = {
    "str": lambda: str(x), "repr": lambda: repr(x), "fstring": lambda: f"{x}", "percent": lambda: "%s" % (x,),
    "print": lambda: print(x, file=io.StringIO()), "format": lambda: format(x),
    "dunder str": lambda: x.__str__(), "dunder repr": lambda: x.__repr__(), "dunder format": lambda: x.__format__(""),
    "str of an int view": lambda: str(one.view(torch.int32)), "format of one": lambda: f"{one:.3f}",
    "item": lambda: one.item(), "float": lambda: float(one), "int": lambda: int(one), "bool": lambda: bool(one > 0),
    "index": lambda: operator.index(one.to(torch.int64)), "complex": lambda: complex(one),
    "item, modes off": modes_off(lambda: one.item()), "float, modes off": modes_off(lambda: float(one)),
    "subclass item": lambda: loud.item(),
    "shape and dtype": lambda: f"{tuple(x.shape)} {x.dtype} {x.dim()} {x.numel()}",
}
counts = {k: counted(f) for k, f in routes.items()}
torch.Tensor.__bool__ = torch._C.TensorBase.__bool__  # the counter put back: the guard must see it
print(json.dumps({"counts": counts, "changed": guard.changed_since(snap)}))
'''


def _run() -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_text_and_scalar_reads_are_counted_once_whatever_the_modes():
    result = _run()
    counts = result["counts"]
    whole = 16 * 16 * 4
    for route in ("str", "repr", "fstring", "percent", "print", "format", "dunder str", "dunder repr",
                  "dunder format"):
        assert counts[route][0] >= whole, (route, counts[route])  # the whole tensor, and what the printer reads
    assert counts["str of an int view"][0] >= 4 and counts["str of an int view"][1] >= 1
    for route in ("format of one", "item", "float", "int", "bool", "index", "complex", "item, modes off",
                  "float, modes off"):
        assert counts[route] == [0, 1], (route, counts[route])
    assert counts["subclass item"][1] >= 8, counts["subclass item"]  # its own reads beyond the one credited
    assert counts["shape and dtype"] == [0, 0]
    assert "torch.Tensor.__bool__" in result["changed"], result["changed"]
