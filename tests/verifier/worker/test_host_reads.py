"""The worker's host-read count: every route by which a tensor's values reach Python, NumPy or bytes inside
forward adds its bytes to the recorder, through aliases, nested containers and user code run inside another
read; one read is counted once. Run in a child process: the count wraps torch's own functions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

CHILD = r'''
import io, json
import numpy as np, torch
from kernelagent.verifier.worker import integrity
from kernelagent.verifier.worker.integrity import OpRecorder
integrity.count_host_reads()
x = torch.randn(64, 64)

def counted(fn):
    rec = OpRecorder()
    with rec:
        fn()
    return rec.transfers.host_read_bytes

class Box:                      # user code run inside torch.save reads the input itself
    def __reduce_ex__(self, proto):
        x.numpy()
        return (list, ())

class Hands:                    # returns the input from __reduce_ex__: torch.save writes a storage it never walked
    def __reduce_ex__(self, proto):
        return (list, ([x],))

class Capsule:                  # hands NumPy a capsule made by a C function
    def __init__(self, c):
        self.c = c
    def __dlpack__(self, stream=None, **kw):
        return self.c
    def __dlpack_device__(self):
        return (1, 0)

class OnGpu(torch.Tensor):      # stands for a CUDA tensor: a DLPack export of one reads nothing on the host
    @property
    def is_cuda(self):
        return True

gpu = torch.Tensor._make_subclass(OnGpu, torch.randn(64, 64))

routes = {
    "dlpack of a gpu tensor": lambda: gpu.__dlpack__(),
    "numpy": lambda: x.numpy(),
    "asarray": lambda: np.asarray(x),
    "tolist": lambda: x.tolist(),
    "dlpack alias": lambda: np.from_dlpack(Capsule(torch.to_dlpack(x))),
    "save nested": lambda: torch.save([[[[[[x]]]]]], io.BytesIO()),
    "save object": lambda: torch.save(Box(), io.BytesIO()),
    "storage pickle": lambda: x.untyped_storage().__reduce__(),
    "storage write_file": lambda: x.untyped_storage()._write_file(io.BytesIO(), False, False, 4),
    "shape only": lambda: tuple(x.shape),
    # a one-element view hands NumPy (as_strided) or torch.save the whole storage; tolist only its values
    "numpy of a view": lambda: np.asarray(x.reshape(-1)[:1]),
    "save of a view": lambda: torch.save(x.reshape(-1)[:1], io.BytesIO()),
    "tolist of a view": lambda: x.reshape(-1)[:1].tolist(),
    "save of a reduce": lambda: torch.save(Hands(), io.BytesIO()),
    "legacy save of a reduce": lambda: torch.save(Hands(), io.BytesIO(), _use_new_zipfile_serialization=False),
    "save of a reduce beside a tensor": lambda: torch.save([Hands(), torch.zeros(64, 64)], io.BytesIO()),
}
from kernelagent.verifier.worker import guard
snap = guard.snapshot()
counts = {k: counted(f) for k, f in routes.items()}
changed = {}
for owner, name in ((torch._C.PyTorchFileWriter, "write_record"), (torch.UntypedStorage, "_write_file"),
                    (torch.UntypedStorage, "tolist"), (torch._C, "_to_dlpack")):
    wrapper = getattr(owner, name)
    original = next(c.cell_contents for c in wrapper.__closure__ if callable(c.cell_contents))
    setattr(owner, name, original)  # the original put back from the wrapper's closure
    changed[name] = guard.changed_since(snap)
    setattr(owner, name, wrapper)
print(json.dumps({"counts": counts, "changed": changed, "after": guard.changed_since(snap)}))
'''


def test_every_route_to_the_host_is_counted_once():
    out = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    counts = result["counts"]
    size = 64 * 64 * 4
    for route in ("numpy", "asarray", "tolist", "dlpack alias", "save nested", "save object", "storage pickle",
                  "storage write_file", "save of a reduce", "legacy save of a reduce"):
        assert counts[route] == size, (route, counts)
    assert counts["shape only"] == 0
    assert counts["numpy of a view"] == size and counts["save of a view"] == size
    assert counts["tolist of a view"] == 4
    assert counts["save of a reduce beside a tensor"] == 2 * size  # the tensor given, and the one it wrote
    for name, changed in result["changed"].items():  # a counter put back is seen by the guard
        assert any(c.endswith("." + name) for c in changed), (name, changed)
    assert result["after"] == []
    assert counts["dlpack of a gpu tensor"] == 0, "CuTe DSL's from_dlpack on GPU tensors is no host read"
