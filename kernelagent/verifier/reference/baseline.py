"""Baseline timings of the reference (eager and torch.compile), in the reference worker (GPU).

Measured with the same method as the candidate (timing.measure) on the same timing trials.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelagent.verifier import tensorio
from kernelagent.verifier.worker.timed import make_call, timing_trial_ids


def _fns(model: Any, runner: Any, ids: list[int]) -> list[Any]:
    sink: dict[int, Any] = {}
    fns = []
    for tid in ids:
        data = tensorio.load(runner.pack / f"inputs_{tid}.pt", runner.device)
        fns.append(make_call(model, tensorio.clone_leaves(data["inputs"]), data.get("grad_outputs"),
                             runner.backward, sink, tid))
    return fns


def time_baselines(runner: Any, meta: dict[str, Any]) -> dict[str, Any]:
    from kernelagent.verifier.measure.timing import measure

    ids = timing_trial_ids(meta)
    init = tensorio.load(runner.pack / "init.pt", runner.device)
    model = runner.build_model(init["init_inputs"])
    model.load_state_dict(init["states"][0])
    out: dict[str, Any] = {"trials": ids, "mode": "forward+backward" if runner.backward else "forward"}
    eager = measure(_fns(model, runner, ids))
    out["eager"] = eager.to_dict()
    try:
        compiled = torch.compile(model)
        out["compile"] = measure(_fns(compiled, runner, ids), use_graph=eager.method == "cuda_graph").to_dict()
    except Exception as e:  # noqa: BLE001 - torch.compile failing is a fact to report, not fatal
        out["compile_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
    return out
