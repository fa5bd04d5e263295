"""Two routes by which a CPU candidate moved the inputs' values into Python under the Triton interpreter with
no counted read (red team round 8, 2026-12-03, both accepted on 11 trials with the policy on):

1. a kernel (or a torch copy) writing the input into memory NumPy holds (`torch.from_numpy` made in __init__),
   NumPy computing there, a kernel copying the answer out: now a write into host-shared memory inside forward
   counts as a host read of the bytes written (`integrity.host_shared`, `interp_bounds._count_shared`);
2. a helper the kernel calls at trace time reading a block's values through `bool()` / `operator.index()`:
   now only the kernel's own code (the interpreter's rewritten @triton.jit functions) may convert a block.

Run in a child process with TRITON_INTERPRET=1: the fixes patch torch and the interpreter, as a CPU worker does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

CHILD = r'''
import json, operator
import numpy as np
import torch
import triton
import triton.language as tl
from kernelagent.verifier.worker import integrity, interp_bounds, interp_fixes
from kernelagent.verifier.worker.integrity import OpRecorder
interp_fixes.keep_kernel_modules_clean()  # as a CPU worker: records the kernels it rewrites (the guards' kernel
interp_fixes.rewrite_what_the_compiler_compiles()  # code), also those without source, run as they are
integrity.count_host_reads()
interp_bounds.install()
interp_bounds.seal_handles()
interp_bounds.guard_conversions()

@triton.jit
def copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)

def _peek(v):
    return operator.index(v)  # a Python helper: reads a block's value at trace time

PEEK = tl.constexpr(_peek)

@triton.jit
def peek(src, dst, PEEKER: tl.constexpr):
    v = tl.load(src)
    PEEKER(v)
    tl.store(dst, v)

@triton.jit
def branchy(src, dst, n):
    v = tl.load(src)
    if v > 0:  # the kernel's own data-dependent branch: allowed, as on the GPU
        tl.store(dst, v)
    else:
        tl.store(dst, -v)

def counted(fn):
    rec = OpRecorder()
    with rec:
        fn()
    return rec.transfers.host_read_bytes

x = torch.randn(256)
shared = torch.from_numpy(np.zeros(256, np.float32))  # memory NumPy owns
owned = torch.empty(256)
exposed = torch.empty(256)
view = exposed.numpy()  # exposed to NumPy before forward
out = {
    "kernel into numpy memory": counted(lambda: copy[(1,)](x, shared, 256, BLOCK=256)),
    "kernel into torch memory": counted(lambda: copy[(1,)](x, owned, 256, BLOCK=256)),
    "kernel reading numpy memory": counted(lambda: copy[(1,)](shared, owned, 256, BLOCK=256)),
    "copy_ into numpy memory": counted(lambda: shared.copy_(x)),
    "copy_ into exposed memory": counted(lambda: exposed.copy_(x)),
    "copy_ into torch memory": counted(lambda: owned.copy_(x)),
}
one, two = torch.tensor([3], dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
try:
    peek[(1,)](one, two, PEEKER=PEEK)
    out["helper conversion"] = "allowed"
except Exception as e:
    out["helper conversion"] = type(e).__name__ + ": " + str(e)[:300]
branchy[(1,)](torch.tensor([-2.0]), owned, 1)
out["kernel branch"] = float(owned[0])
print("JSON:" + json.dumps(out))
'''


def test_host_shared_writes_are_counted_and_helpers_cannot_convert_blocks():
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    proc = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("JSON:")]
    assert lines, proc.stderr[-3000:]
    out = json.loads(lines[-1][5:])
    size = 256 * 4
    assert out["kernel into numpy memory"] == size and out["copy_ into numpy memory"] == size
    assert out["copy_ into exposed memory"] == size
    assert out["kernel into torch memory"] == 0 and out["copy_ into torch memory"] == 0
    assert out["kernel reading numpy memory"] == 0  # a NumPy table read by a kernel stays allowed
    assert "InterpreterInternals" in out["helper conversion"], out["helper conversion"]
    assert out["kernel branch"] == 2.0
