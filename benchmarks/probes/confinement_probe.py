"""Confinement on the GPU machine, in one run: what the lead must know before trusting it on the H200.

1. CUDA under the candidate rules, in nsinit's namespaces, in both orders: Landlock + seccomp after CUDA's
   first context (the default) and before torch is even imported (closes the gap of CUDA's own threads
   outside the Landlock domain; set confine.RESTRICT_BEFORE_CUDA = True if it works). Each child makes a
   tensor, compiles and launches a Triton kernel, then tries what a candidate must not do. When the early
   order fails, variants say which wall CUDA's set-up hits.
2. Whole verifications with the default confinement: Triton (timing and the torch.compile baseline in the
   reference worker), CuTe DSL, and one with --profile --sanitize (ncu and compute-sanitizer started
   by the launcher, tool profile).
3. The cost: benchmarks/confinement_cost.py, cold and pooled, "auto" against "off".

Run on the GPU: `python -m benchmarks.probes.confinement_probe` (writes $OUT/confinement_probe.json).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import write_result
from kernelagent.verifier.sandbox.spawn import NSINIT, make_workdir

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, os, sys, tempfile, time
sys.path.insert(0, {root!r})
from pathlib import Path
from kernelagent.verifier.sandbox import confine
work = Path(sys.argv[1]); order = sys.argv[2]; variant = json.loads(sys.argv[3])
os.environ.update(TMPDIR=str(work), TRITON_CACHE_DIR=str(work / "triton"), HOME=str(work))
tempfile.tempdir = str(work)
profile = confine.Profile("probe", **variant.get("profile", {{}}))
out = {{"order": order, "variant": variant}}
def walls():
    t = time.perf_counter()
    try:
        out["confinement"] = confine.apply(work, confine.Settings(level="strict", profile=profile))
    except confine.ConfinementError as e:
        out["confinement"] = f"refused: {{e}}"
    out["apply_s"] = round(time.perf_counter() - t, 4)
def attempt(name, fn):
    try:
        out[name] = "ok " + repr(fn())[:100]
    except BaseException as e:
        out[name] = f"failed {{type(e).__name__}}: {{str(e)[:200]}}"
if order == "before":
    walls()
attempt("cuda_init", lambda: __import__("torch").zeros(1, device="cuda").item())
if order == "after":
    walls()
out["threads"] = len(os.listdir("/proc/self/task"))
import torch, triton, triton.language as tl
@triton.jit
def _twice(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=m) * 2, mask=m)
def triton_run():
    x = torch.randn(4096, device="cuda"); y = torch.empty_like(x)
    _twice[(16,)](x, y, 4096, BLOCK=256); torch.cuda.synchronize()
    return bool(torch.equal(y, 2 * x))
attempt("triton", triton_run)
attempt("matmul", lambda: float((torch.randn(256, 256, device="cuda") @ torch.randn(256, 256, device="cuda")).sum()))
attempt("read_root_home", lambda: os.listdir("/root"))
attempt("write_var_tmp", lambda: open("/var/tmp/ka-probe-escape", "w").write("x"))
attempt("socket", lambda: __import__("socket").socket())
attempt("proc_listing", lambda: sorted(p for p in os.listdir("/proc") if p.isdigit())[:10])
print(json.dumps(out))
"""

# when the early order fails: which wall CUDA's set-up hits
VARIANTS = [
    {},
    {"profile": {"deny_sockets": False}},
    {"profile": {"scope_abstract": False, "scope_signal": False}},
    {"profile": {"dev_shm_rw": True}},
    {"profile": {"landlock": False}},
]


def cuda_orders() -> list[dict]:
    rows = []
    for order, variants in (("after", VARIANTS[:1]), ("before", VARIANTS)):
        for variant in variants:
            rows.append(_child(order, variant))
            print(json.dumps(rows[-1])[:400], flush=True)
            if order == "before" and rows[-1].get("triton", "").startswith("ok True") and variant == {}:
                break  # the early order works as it is: no need to bisect
    return rows


def _child(order: str, variant: dict) -> dict:
    work = make_workdir(prefix="ka-probe-")
    Path(f"{work}-out").mkdir(exist_ok=True)
    code = CHILD.format(root=str(ROOT))
    cmd = [sys.executable, "-I", "-S", str(NSINIT), "--keep", str(work), "--", sys.executable, "-c", code, str(work),
           order, json.dumps(variant)]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    try:
        row = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        row = {"order": order, "variant": variant, "crashed": proc.returncode, "stderr": proc.stderr[-2000:]}
    row["seconds"] = round(time.perf_counter() - t, 2)
    subprocess.run(["rm", "-rf", str(work), f"{work}-out"], check=False)
    return row


def verifications() -> dict:
    from kernelagent.verifier.api import Verifier
    from kernelagent.verifier.options import VerifyOptions
    from kernelagent.verifier.sandbox.pool import WorkerPool

    cases = {"triton": ("examples/softmax/op.py", "examples/softmax/kernel.py", {}),
             "cute": ("examples/softmax/op.py", "examples/softmax/kernel_cute.py", {}),
             "tools": ("examples/softmax/op.py", "examples/softmax/kernel.py", {"profile": True, "sanitize": True})}
    out = {}
    for name, (op, kernel, extra) in cases.items():
        opts = VerifyOptions(device="cuda", seeds=2, timeout=300, **extra)
        with Verifier(opts, pool=WorkerPool(size=0, confinement="strict")) as v:
            t = time.perf_counter()
            r = v.verify(ROOT / op, ROOT / kernel)
        out[name] = {"verdict": r.verdict, "category": r.category, "message": r.message[:500],
                     "seconds": round(time.perf_counter() - t, 2),
                     "confinement": r.environment.get("confinement"),
                     "stages": [(s.name, s.status, s.message[:300]) for s in r.stages]}
        print(name, json.dumps(out[name])[:600], flush=True)
    return out


def main() -> None:
    result = {"cuda_orders": cuda_orders(), "verify": verifications()}
    try:
        from benchmarks import confinement_cost
        sys.argv = [sys.argv[0], "--device", "cuda", "--rounds", "3"]
        confinement_cost.main()
        result["cost"] = "see confinement_cost.json"
    except Exception as e:  # noqa: BLE001 - the probe's other findings still get written
        result["cost"] = f"failed: {type(e).__name__}: {e}"
    if os.path.exists("/var/tmp/ka-probe-escape"):
        result["escaped"] = "a child wrote /var/tmp/ka-probe-escape"
    print("wrote", write_result("confinement_probe", result))


if __name__ == "__main__":
    main()
