"""Run code under Triton's CPU interpreter in a child process.

TRITON_INTERPRET must be set before triton is first imported and cannot be switched off again, so
interpreter checks run in a fresh `python -c` child and the rest of the pytest session keeps the
normal mode. The child prints one JSON object on a line starting with RESULT_PREFIX.

triton 3.6's interpreter truncates fp32 -> bf16 where the GPU rounds to nearest even; that doubles
bf16 output errors and, in gradients that cancel, makes them exceed the verifier's bf16 limits
although the same kernel is within them on the GPU. The child therefore rounds to nearest first
(round_bf16_to_nearest), unless asked not to.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULT_PREFIX = "@@interp-result@@ "


class InterpreterRunError(RuntimeError):
    """The child failed, timed out or printed no result line."""


_PRELUDE = "from tests.helpers.interp import round_bf16_to_nearest\nround_bf16_to_nearest()\n"


def round_bf16_to_nearest() -> None:
    """In the child: make the interpreter's fp32 -> bf16 conversion round to nearest even, like the GPU."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    truncating = interpreter._convert_float

    def convert(values, input_dtype, output_dtype, rounding_mode):
        if not (input_dtype == tl.float32 and output_dtype == tl.bfloat16):
            return truncating(values, input_dtype, output_dtype, rounding_mode)
        flat = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
        bits = flat.view(np.uint32).astype(np.uint64)
        out = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        out[np.isnan(flat)] = 0x7FC0
        return out.reshape(np.shape(values))

    interpreter._convert_float = convert


def emit(result: dict) -> None:
    """Called in the child: print the result line the parent looks for."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def single_threaded(env: dict[str, str]) -> dict[str, str]:
    """`env` with torch's CPU ops on one thread (unless OMP_NUM_THREADS is set): the suite runs two such
    children at once on a 2-core machine, where a second OpenMP thread per child only spins (the examples'
    child used ~80 CPU-seconds with two threads, ~52 with one, under the suite's load). The checks compare
    with tolerances; a thread count changes at most the order of a reduction in torch's references."""
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_in_interpreter(code: str, timeout: float = 300.0, round_bf16: bool = True) -> dict:
    """Run `code` with TRITON_INTERPRET=1 and the repository on sys.path; return what it emit()ted."""
    code = (_PRELUDE if round_bf16 else "") + code
    env = single_threaded(dict(os.environ, TRITON_INTERPRET="1"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    try:
        proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise InterpreterRunError(f"interpreter child timed out after {timeout:.0f} s") from e
    if proc.returncode != 0:
        raise InterpreterRunError(f"interpreter child exited with {proc.returncode}:\n{proc.stderr[-4000:]}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_PREFIX)]
    if not lines:
        raise InterpreterRunError(f"interpreter child printed no result line; stdout tail:\n{proc.stdout[-2000:]}")
    return json.loads(lines[-1][len(RESULT_PREFIX):])
