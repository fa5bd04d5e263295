"""The floor a verifier's cold start is measured against: the unsafe, minimal harness in a fresh process.

It imports torch and triton, loads the problem and the candidate in its own process (no sandbox, no
integrity checks), runs both once on one input, compares with `torch.allclose` and times the candidate
with `triton.testing.do_bench`. `python benchmarks/naive_harness.py` runs it in fresh processes and
reports the wall time of each; `verifier_cost.py` runs it in the same session as the cold verifies.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import importlib.util, sys, torch, triton.testing
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod
op, cand = load(sys.argv[1], "op"), load(sys.argv[2], "cand")
torch.manual_seed(0)
inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in op.get_inputs()]
ref = op.Model(*op.get_init_inputs()).cuda()
new = cand.ModelNew(*op.get_init_inputs()).cuda()
with torch.no_grad():
    ok = torch.allclose(ref(*inputs), new(*inputs), atol=1e-4, rtol=1e-4)
    ms = triton.testing.do_bench(lambda: new(*inputs), return_mode="median")
print("ok" if ok else "mismatch", ms)
"""


def run_once(op: Path, kernel: Path) -> dict:
    t = time.perf_counter()
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, str(op), str(kernel)], capture_output=True, text=True,
                             cwd=str(ROOT), timeout=300)
    except subprocess.TimeoutExpired:
        return {"seconds": round(time.perf_counter() - t, 3), "result": "timeout", "rc": None, "stderr": ""}
    secs = round(time.perf_counter() - t, 3)
    last = (out.stdout.strip().splitlines() or [""])[-1]
    return {"seconds": secs, "result": last, "rc": out.returncode,
            "stderr": out.stderr[-300:] if out.returncode else ""}


def main(op: Path, kernel: Path, repeats: int = 2) -> list[dict]:
    rows = [run_once(op, kernel) for _ in range(repeats)]
    for r in rows:
        print("naive fresh process", r, flush=True)
    return rows


if __name__ == "__main__":
    args = sys.argv[1:] or [str(ROOT / "problems/bench/softmax_16x16384.py"),
                            str(ROOT / "examples/softmax/kernel.py")]
    main(Path(args[0]), Path(args[1]))
