"""Where a verification's timing stage spends its seconds on a small kernel (GPU): the measurement of
`time_model` on the 1 MiB softmax benchmark problem, phase by phase, with the per-call host time, the spin
and the method, under each variant named on the command line (default: all).

  python3 benchmarks/probes/timing_cost.py [variant ...]
variants: current timed_warmup spin_median current+spin_median graph worker
(`worker`: as the candidate's worker times it, with the op recorder and the launch hook on.)
With PROFILE=1 each run also prints the 25 functions with the most host time of their own (cProfile).
Prints one JSON line per run.
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kernelagent.problem import load_module  # noqa: E402
from kernelagent.verifier.measure import timing  # noqa: E402
from kernelagent.verifier.measure.fresh import DrawMode, choose_mode  # noqa: E402
from kernelagent.verifier.protocol import TimingPlan  # noqa: E402
from kernelagent.verifier.worker.timed import time_model  # noqa: E402

_HOOKED: list[bool] = []


def _instrumented():
    """Wrap _Calls.one to record host seconds per call and the spin size in force."""
    seen = {"host_ms": [], "spin_ms": []}
    one = timing._Calls.one

    def wrapped(self, record=True):
        t = time.perf_counter()
        r = one(self, record)
        seen["host_ms"].append((time.perf_counter() - t) * 1e3)
        seen["spin_ms"].append(self.spin.ms)
        seen["recent_P_ms"] = [round(x, 3) for x in self.spin.host_ms]
        return r

    timing._Calls.one = wrapped
    return seen, lambda: setattr(timing._Calls, "one", one)


def run(variant: str, model, problem, plan, mode) -> dict:
    template = [x.cuda() for x in problem.get_inputs()]
    seen, undo = _instrumented()
    use_graph = True if variant == "graph" else None
    size, samples = timing._Spin.size, timing._event_samples
    warm = timing._warm_up
    if "timed_warmup" in variant:  # the warm-up as before 2026-12-02: spin and events on every call
        timing._warm_up = lambda calls, n, host_s, least: samples(calls, n, host_s, least)
    if "spin_median" in variant:
        def median_size(self):
            if timing._spin is None or not self.host_ms:
                return
            mid = sorted(self.host_ms)[len(self.host_ms) // 2]
            ms = min(timing.SPIN_MAX_MS, max(timing.SPIN_FLOOR_MS, timing.SPIN_MARGIN * mid))
            self.cycles = int(ms * self.cycles_per_ms())
        timing._Spin.size = median_size
    recorder = None
    if variant == "worker":
        from kernelagent.verifier.worker.integrity import LaunchCounter, OpRecorder
        recorder = OpRecorder
        if not _HOOKED:
            LaunchCounter().install_triton(False)  # it stays for the runs after
            _HOOKED.append(True)
    prof = cProfile.Profile() if os.environ.get("PROFILE") == "1" else None
    t = time.perf_counter()
    if prof is not None:
        prof.enable()
    res, _ = time_model(model, problem.get_inputs, template, plan, mode, "cuda", False, fingerprints=True,
                        use_graph=use_graph, recorder=recorder)
    if prof is not None:
        prof.disable()
    wall = time.perf_counter() - t
    undo()
    timing._Spin.size, timing._warm_up = size, warm
    hs = sorted(seen["host_ms"])
    return {"variant": variant, "wall_s": round(wall, 4), "method": res.method, "median_ms": res.median_ms,
            "n": res.n, "calls": res.calls, "phases_s": res.phases_s, "spin_ms_final": res.spin_ms,
            "host_ms_per_call": {"median": hs[len(hs) // 2] if hs else None, "max": hs[-1] if hs else None,
                                 "first5": [round(x, 3) for x in seen["host_ms"][:5]]},
            "recent_P_ms": seen.get("recent_P_ms"), "spin_ms_seen": sorted({round(x, 3) for x in seen["spin_ms"]})[:12],
            "launch_host_ms": res.launch_host_ms, "profile": _top(prof) if prof is not None else None}


def _top(prof: cProfile.Profile, n: int = 25) -> list[str]:
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(n)
    return [line.strip() for line in out.getvalue().splitlines() if line.strip()][-n:]


def main() -> None:
    problem = load_module(ROOT / "problems/bench/softmax_16x16384.py", "p_softmax")
    cand = load_module(ROOT / "examples/softmax/kernel.py", "c_softmax", "candidate")
    model = cand.ModelNew().cuda()
    eager = problem.Model().cuda()
    plan = TimingPlan.new()
    mode = choose_mode(problem.get_inputs, plan, "cuda")
    print(json.dumps({"mode": mode.describe()}), flush=True)
    variants = sys.argv[1:] or ["timed_warmup", "current", "current+spin_median", "graph"]
    for rnd in range(2):
        for v in variants:
            for name, m in (("candidate", model), ("eager", eager)):
                row = run(v, m, problem, plan, DrawMode(mode.kind, mode.pool, mode.fresh_every))
                row.update(round=rnd, model=name)
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
