"""Under the Triton interpreter, `tl.device_print` output goes to file descriptor 2, never through
sys.stdout, so a candidate that swaps sys.stdout cannot read the values its kernel prints (red team,
2026-12-03: the inputs' bits printed, captured with contextlib.redirect_stdout and parsed back, the softmax
computed on the host, accepted). Run in a child process: the fix patches the interpreter, as a CPU worker does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

CHILD = r'''
import contextlib, io, sys
import torch
import triton
import triton.language as tl
from kernelagent.verifier.worker.interp_fixes import print_to_the_real_stderr
if sys.argv[1] == "fixed":
    assert print_to_the_real_stderr()

@triton.jit
def show(x_ptr, BLOCK: tl.constexpr):
    tl.device_print("seen", tl.load(x_ptr + tl.arange(0, BLOCK)))

sink = io.StringIO()
with contextlib.redirect_stdout(sink):
    show[(1,)](torch.arange(4, dtype=torch.int32) + 4100, BLOCK=4)
print("SINK:" + repr(sink.getvalue()))
'''


def _run(mode: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    return subprocess.run([sys.executable, "-c", CHILD, mode], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def test_device_print_skips_a_swapped_stdout():
    fixed = _run("fixed")
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    assert "SINK:''" in fixed.stdout, fixed.stdout  # nothing reached the candidate's sink
    assert "seen" in fixed.stderr and "4103" in fixed.stderr, fixed.stderr[-2000:]  # the values went to fd 2


def test_without_the_fix_the_sink_reads_the_values():
    """What the fix closes: the interpreter's own print hands the values to whoever holds sys.stdout."""
    plain = _run("plain")
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert "4103" in plain.stdout.split("SINK:")[-1], plain.stdout
