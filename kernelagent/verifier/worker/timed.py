"""Timing the candidate inside its worker (GPU), on the pack's timing trials, in rotation."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

from kernelagent.verifier import tensorio
from kernelagent.verifier.measure.timing import measure


def timing_trial_ids(meta: dict[str, Any]) -> list[int]:
    ids = [t["id"] for t in meta["trials"] if t.get("timing")]
    return ids or [next(t["id"] for t in meta["trials"] if t["state"] == 0)]


def make_call(model: Any, inputs: list[Any], grad_outputs: list[Any] | None, backward: bool,
              sink: dict[int, Any], key: int):
    """A closure running one forward (and backward) on fixed buffers, keeping its last output."""
    if not backward:
        def fwd() -> None:
            with torch.no_grad():
                sink[key] = model(*inputs)
        return fwd
    diff = [x for x in pytree.tree_leaves(inputs) if isinstance(x, torch.Tensor) and x.is_floating_point()]
    for t in diff:
        t.requires_grad_(True)
    params = [p for p in model.parameters() if p.requires_grad]

    def fwd_bwd() -> None:
        out = model(*inputs)
        leaves = [x for x in pytree.tree_leaves(out) if isinstance(x, torch.Tensor) and x.requires_grad]
        torch.autograd.grad(leaves, diff + params, grad_outputs[:len(leaves)], allow_unused=True)
        sink[key] = out
    return fwd_bwd


def time_candidate(runner: Any) -> dict[str, Any]:
    ids = timing_trial_ids(runner.meta)
    runner.load_state(0)
    sink: dict[int, Any] = {}
    fns, bufs_of = [], {}
    for tid in ids:
        data = runner.trials[tid]
        bufs = tensorio.clone_leaves(data["inputs"])
        bufs_of[tid] = bufs
        fns.append(make_call(runner.model, bufs, data.get("grad_outputs"), runner.backward, sink, tid))
    # the same method as the baseline: CUDA-graph replay on both sides when eager ran under 10 us
    eager_method = ((runner.meta.get("baseline") or {}).get("eager") or {}).get("method")
    timing = measure(fns, use_graph=None if eager_method is None else eager_method == "cuda_graph")
    for tid in ids:
        leaves, _ = tensorio.flatten(sink[tid])
        runner.save(f"timed_{tid}", {"leaves": [x.detach() if isinstance(x, torch.Tensor) else x for x in leaves],
                                     "grads": None})
    return {"candidate": timing.to_dict(), "checked_trials": ids, "after": after_timing(runner, ids, bufs_of),
            "mode": "forward+backward" if runner.backward else "forward"}


def after_timing(runner: Any, ids: list[int], bufs_of: dict[int, list[Any]]) -> list[dict[str, Any]]:
    """Once timed, each timing buffer gets the values of the next timing trial and is run once more,
    with aten ops recorded and launches counted: a kernel that started remembering answers (by
    pointer, shape or call count) or stopped launching after its warm-up is caught here."""
    from kernelagent.verifier.worker.integrity import OpRecorder

    if runner.device == "cuda":
        runner.launches.install_triton(False)
    out = []
    for i, tid in enumerate(ids):
        donor = ids[(i + 1) % len(ids)]
        bufs = bufs_of[tid]
        for dst, src in zip(pytree.tree_leaves(bufs), pytree.tree_leaves(runner.trials[donor]["inputs"]), strict=True):
            if isinstance(dst, torch.Tensor):
                with torch.no_grad():
                    dst.copy_(src)
        rec = OpRecorder()
        before = runner.launches.snapshot()
        with torch.no_grad(), rec:
            result = runner.model(*bufs)
        runner.sync()
        leaves, _ = tensorio.flatten(result)
        runner.save(f"after_{tid}", {"leaves": leaves, "grads": None})
        counted = runner.req.get("backend") != "cute"  # CuTe's launch hook is off after timing
        out.append({"buffers_of": tid, "values_of": donor,
                    "launches": runner.launches.snapshot() - before if counted else None,
                    "compute_ops": rec.compute_ops()})
    return out
