"""Where does the verifier's timing of an honest kernel differ from `triton.testing.do_bench`? (GPU only)

Times one honest candidate (default: the plain Triton softmax of the timing corpus, 16384x4096 fp32) in
steps that add one piece of the verifier's timing at a time, in one process, interleaved over rounds:

  do_bench      triton.testing.do_bench on a rotation of 16 input sets (what the corpus test compares with)
  measure       measure.timing.measure on the same rotation (our events, flush and statistics)
  refresh       + a new draw of get_inputs() copied into fixed buffers before each call
  prints        + fingerprints of every call's outputs
  recorder      + the op recorder around each call (what time_candidate does)

Prints one JSON object: per step the medians and means of every round (ms).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from pathlib import Path

import torch
import triton

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kernelagent.verifier.measure.fresh import DrawMode  # noqa: E402
from kernelagent.verifier.measure.timing import Workload, measure  # noqa: E402
from kernelagent.verifier.protocol import TimingPlan  # noqa: E402
from kernelagent.verifier.worker.integrity import OpRecorder  # noqa: E402
from kernelagent.verifier.worker.timed import time_model  # noqa: E402


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def steps(model, get_inputs, shape):
    xs = [torch.randn(*shape, device="cuda") for _ in range(16)]
    state = {"i": 0}

    def call() -> None:
        state["i"] += 1
        model(xs[state["i"] % len(xs)])

    template = [torch.randn(*shape, device="cuda")]
    plan, mode = TimingPlan.new(), DrawMode("fresh")

    def ours(prints: bool, recorder) -> tuple[float, float]:
        t, _ = time_model(model, get_inputs, template, plan, mode, "cuda", False, fingerprints=prints,
                          recorder=recorder, use_graph=False)
        return t.median_ms, t.mean_ms

    def bench() -> tuple[float, float]:
        med = triton.testing.do_bench(call, warmup=50, rep=400, return_mode="median")
        mean = triton.testing.do_bench(call, warmup=50, rep=400, return_mode="mean")
        return med, mean

    def plain() -> tuple[float, float]:
        t = measure(Workload.of([lambda x=x: model(x) for x in xs]))
        return t.median_ms, t.mean_ms

    return {"do_bench": bench, "measure": plain, "refresh": lambda: ours(False, None),
            "prints": lambda: ours(True, None), "recorder": lambda: ours(True, OpRecorder)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--candidate", default=str(ROOT / "tests/corpus/honest/timing/plain.py"))
    ap.add_argument("--problem", default=str(ROOT / "problems/corpus/softmax_timing.py"))
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    problem = load(Path(args.problem), "problem")
    model = load(Path(args.candidate), "candidate").ModelNew().cuda()
    shape = tuple(problem.get_inputs()[0].shape)
    table = steps(model, problem.get_inputs, shape)
    out: dict[str, dict[str, list[float]]] = {k: {"median": [], "mean": []} for k in table}
    for _ in range(args.rounds):
        for name, fn in table.items():
            med, mean = fn()
            out[name]["median"].append(round(med, 5))
            out[name]["mean"].append(round(mean, 5))
    summary = {k: {"median_of_medians": statistics.median(v["median"]), **v} for k, v in out.items()}
    print(json.dumps({"gpu": torch.cuda.get_device_name(), "shape": shape, "steps": summary}, indent=1))


if __name__ == "__main__":
    main()
