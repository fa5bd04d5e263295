"""Where a fresh process's start-up time goes on this machine (the bulk of a cold verify).

Fresh `python3` processes, one after another, nothing else running: plain start-up, `import torch`,
+triton, +torch._dynamo, the CUDA context, and a verifier worker from spawn to ready (the worker's own
sequence: torch, triton, the driver helper built in parallel, the CUDA context). Also the 25 slowest
modules of `import torch` by `-X importtime` (self and cumulative), and whether the installed packages
carry compiled bytecode (workers run with PYTHONDONTWRITEBYTECODE=1, so missing .pyc files would be
recompiled by every worker).
Run: `python benchmarks/import_profile.py` on the GPU; writes import_profile.json under $OUT.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import write_result

STEPS = {
    "python": "pass",
    "torch": "import torch",
    "torch+triton": "import torch, triton",
    "+dynamo": "import torch, triton, torch._dynamo",
    "torch+cuda context": "import torch; torch.zeros(1, device='cuda')",
    "torch+triton+cuda context": "import torch, triton; torch.zeros(1, device='cuda')",
}


def timed(code: str, env: dict[str, str] | None = None) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    return round(time.perf_counter() - t, 3)


def worker_ready_seconds() -> float:
    from kernelagent.verifier.sandbox.pool import Worker

    t = time.perf_counter()
    w = Worker("cuda")
    while not (w.workdir / "ready").exists():
        if w.proc.poll() is not None:
            return -1.0
        time.sleep(0.01)
    secs = round(time.perf_counter() - t, 3)
    w.discard()
    return secs


def importtime(code: str = "import torch", top: int = 25) -> dict[str, list]:
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True)
    rows = []
    for line in out.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[0].strip().startswith("import time:") and parts[1].strip().isdigit():
            rows.append((parts[2].rstrip(), int(parts[0].split(":")[1]), int(parts[1])))
    by_self = sorted(rows, key=lambda r: -r[1])[:top]
    by_cum = sorted(rows, key=lambda r: -r[2])[:top]
    return {"total_us": sum(r[1] for r in rows), "modules": len(rows),
            "by_self_us": [(n.strip(), s) for n, s, _ in by_self],
            "by_cumulative_us": [(n, c) for n, _, c in by_cum]}


def bytecode() -> dict[str, object]:
    import torch
    import triton

    facts = {}
    for mod in (torch, triton):
        root = Path(mod.__file__).parent
        sources = list(root.rglob("*.py"))
        tag = sys.implementation.cache_tag
        compiled = sum(1 for p in sources if (p.parent / "__pycache__" / f"{p.stem}.{tag}.pyc").exists())
        facts[mod.__name__] = {"dir": str(root), "py": len(sources), "pyc": compiled,
                               "writable": os.access(root, os.W_OK)}
    return facts


def main() -> dict:
    result: dict = {"seconds": {}, "python": sys.version.split()[0], "cpus": os.cpu_count()}
    for rep in range(int(os.environ.get("IMPORT_REPEATS", "2"))):
        for name, code in STEPS.items():
            result["seconds"].setdefault(name, []).append(timed(code))
        result["seconds"].setdefault("worker to ready", []).append(worker_ready_seconds())
        print(rep, {k: v[-1] for k, v in result["seconds"].items()}, flush=True)
    result["bytecode"] = bytecode()
    print("bytecode", result["bytecode"], flush=True)
    result["importtime_torch"] = importtime()
    for name, us in result["importtime_torch"]["by_cumulative_us"][:15]:
        print(f"{us / 1e6:8.3f} s {name}", flush=True)
    write_result("import_profile", result)
    return result


if __name__ == "__main__":
    main()
