"""What confinement costs a verification: the namespace launcher alone, a worker's start until ready, and
whole verifications, cold (fresh workers) and pooled (a pre-started worker), with confinement "auto"
against "off"; rounds alternate so that a busy machine hurts both sides alike. Wall time, and where it
can be had, CPU time (this process and its finished children: robust to other work on the machine).
Also the time the worker spent applying Landlock + seccomp, from its report.

Run: `python benchmarks/confinement_cost.py [--rounds N] [--device cpu|cuda] [--timing]` (writes
$OUT/confinement_cost.json, or benchmarks/results/). On CPU it verifies the small softmax case under the
Triton interpreter; on a GPU, the examples/softmax kernel against its problem. The verifications leave the
timing stage out unless `--timing` is given: timing runs the same kernel launches with and without walls,
and its fixed budget would only add the same seconds to both sides.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import write_result
from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.sandbox.pool import Worker, WorkerPool
from kernelagent.verifier.sandbox.spawn import NSINIT

ROOT = Path(__file__).resolve().parents[1]
CASES = {"cpu": (ROOT / "problems/corpus/softmax_cases.py", ROOT / "tests/corpus/honest/softmax/good.py"),
         "cuda": (ROOT / "examples/softmax/op.py", ROOT / "examples/softmax/kernel.py")}
LEVELS = ("off", "auto")


def _seconds(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _cpu() -> float:
    """CPU seconds of this process and of the children it has waited for."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def launcher(rounds: int) -> dict[str, list[float]]:
    """A bare `python -I -S` start with and without the launcher (namespaces, mounts) around it."""
    bare = [sys.executable, "-I", "-S", "-c", "pass"]
    cmds = {"plain": bare, "nsinit": [sys.executable, "-I", "-S", str(NSINIT), "--", *bare]}
    out: dict[str, list[float]] = {f"{k}_{m}": [] for k in cmds for m in ("wall", "cpu")}
    for _ in range(rounds):
        for name, cmd in cmds.items():
            c = _cpu()
            out[f"{name}_wall"].append(_seconds(lambda cmd=cmd: subprocess.run(cmd, check=True)))
            out[f"{name}_cpu"].append(_cpu() - c)
    return out


def ready(device: str, rounds: int) -> dict[str, list[float]]:
    """A worker's start until it has imported torch/triton (and is confined) and waits for a request (wall);
    and the CPU of its whole life when it is given no request (it leaves right after `ready`)."""
    out: dict[str, list[float]] = {f"{lv}_{m}": [] for lv in LEVELS for m in ("wall", "cpu")}
    for _ in range(rounds):
        for level in LEVELS:
            c, t = _cpu(), time.perf_counter()
            w = Worker(device, confinement=level)
            while not (w.workdir / "ready").exists() and w.proc.poll() is None:
                time.sleep(0.005)
            out[f"{level}_wall"].append(time.perf_counter() - t)
            w.proc.stdin.close()  # an empty request: the worker exits
            w.proc.wait(60)
            out[f"{level}_cpu"].append(_cpu() - c)
            w.discard()
    return out


def verifications(device: str, rounds: int, timing: bool = False) -> dict[str, dict[str, list[float]]]:
    """Whole verifications: cold (every worker started for it) and pooled (started beforehand)."""
    problem, kernel = CASES[device]
    out: dict[str, dict[str, list[float]]] = {f"{kind}_{lv}": {"seconds": [], "apply": [], "cpu": []}
                                              for kind in ("cold", "pool") for lv in LEVELS}
    # the reference pack is not what is measured: built once per verifier, then taken from the cache
    opts = VerifyOptions(device=device, seeds=1, timeout=300, cache=True, timing=timing)
    verifiers = {lv: Verifier(opts, pool=WorkerPool(size=0, confinement=lv)) for lv in LEVELS}
    try:
        for v in verifiers.values():
            v.verify(problem, kernel)  # builds the reference pack once per verifier
        for _ in range(rounds):
            for lv, v in verifiers.items():
                v.pool = WorkerPool(size=0, confinement=lv)
                _record(out[f"cold_{lv}"], v, problem, kernel)
                v.pool = WorkerPool(size=1, confinement=lv)
                v.pool.warm(device, *(["aot"] if device == "cpu" else []))
                _wait_idle(v.pool)
                _record(out[f"pool_{lv}"], v, problem, kernel)
                v.pool.close()
    finally:
        for v in verifiers.values():
            v.close()
    return out


def _record(row: dict[str, list[float]], v: Verifier, problem: Path, kernel: Path) -> None:
    """One verification's wall time, its CPU (meaningful cold: every worker is waited for), the apply time."""
    c, t = _cpu(), time.perf_counter()
    report = v.verify(problem, kernel)
    row["seconds"].append(round(time.perf_counter() - t, 3))
    row["cpu"].append(round(_cpu() - c, 3))
    row["apply"].append(float((report.environment.get("confinement") or {}).get("seconds") or 0.0))
    assert report.accepted, report.message


def _wait_idle(pool: WorkerPool, limit: float = 120.0) -> None:
    t = time.monotonic()
    while time.monotonic() - t < limit:
        idle = [w for ws in pool._idle.values() for w in ws]
        if idle and all((w.workdir / "ready").exists() for w in idle):
            return
        time.sleep(0.02)


def _median(xs: list[float]) -> float:
    return round(statistics.median(xs), 3) if xs else 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--timing", action="store_true", help="keep the timing stage in the verifications")
    args = ap.parse_args()
    import torch
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    runs: dict = {}
    phases = (("launcher", lambda: launcher(10 * args.rounds)), ("ready", lambda: ready(device, args.rounds)),
              ("verify", lambda: verifications(device, args.rounds, args.timing)))
    for name, phase in phases:  # written after each phase: a run stopped half-way keeps what it measured
        runs[name] = phase()
        path = _write(device, args.rounds, args.timing, runs)
    print("wrote", path)


def _write(device: str, rounds: int, timing: bool, runs: dict) -> Path:
    summary = _summary(runs)
    print(summary, flush=True)
    return write_result("confinement_cost", {"device": device, "rounds": rounds, "timing": timing,
                                             "summary": summary,
                                             "complete": set(runs) == {"launcher", "ready", "verify"},
                                             "medians": _medians(runs), "runs": runs,
                                             "method": __doc__.split("\n\n")[0]})


def _summary(runs: dict) -> dict:
    d = (lambda a, b: round(_median(a) - _median(b), 3))
    out = {}
    if "launcher" in runs:
        la = runs["launcher"]
        out |= {"launcher_extra_wall_s": d(la["nsinit_wall"], la["plain_wall"]),
                "launcher_extra_cpu_s": d(la["nsinit_cpu"], la["plain_cpu"])}
    if "ready" in runs:
        re = runs["ready"]
        out |= {"worker_extra_wall_s": d(re["auto_wall"], re["off_wall"]),
                "worker_extra_cpu_s": d(re["auto_cpu"], re["off_cpu"])}
    if "verify" in runs:
        ve = runs["verify"]
        out |= {"cold_extra_wall_s": d(ve["cold_auto"]["seconds"], ve["cold_off"]["seconds"]),
                "cold_extra_cpu_s": d(ve["cold_auto"]["cpu"], ve["cold_off"]["cpu"]),
                "pool_extra_wall_s": d(ve["pool_auto"]["seconds"], ve["pool_off"]["seconds"]),
                "apply_s": _median(ve["pool_auto"]["apply"] + ve["cold_auto"]["apply"])}
    return out


def _medians(runs: dict) -> dict:
    out = {f"launcher_{k}": _median(v) for k, v in runs.get("launcher", {}).items()}
    out |= {f"worker_{k}": _median(v) for k, v in runs.get("ready", {}).items()}
    out |= {f"verify_{k}_{m}": _median(v[m]) for k, v in runs.get("verify", {}).items() for m in ("seconds", "cpu")}
    return out


if __name__ == "__main__":
    main()
