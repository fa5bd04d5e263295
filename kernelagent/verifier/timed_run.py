"""Timing the candidate inside its worker (GPU), on the pack's timing trials, in rotation."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

from kernelagent.verifier import tensorio
from kernelagent.verifier.timing import measure


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
    fns = []
    for tid in ids:
        data = runner.trials[tid]
        bufs = tensorio.clone_leaves(data["inputs"])
        fns.append(make_call(runner.model, bufs, data.get("grad_outputs"), runner.backward, sink, tid))
    # the same method as the baseline: CUDA-graph replay on both sides when eager ran under 10 us
    eager_method = ((runner.meta.get("baseline") or {}).get("eager") or {}).get("method")
    timing = measure(fns, use_graph=None if eager_method is None else eager_method == "cuda_graph")
    for tid in ids:
        leaves, _ = tensorio.flatten(sink[tid])
        runner.save(f"timed_{tid}", {"leaves": [x.detach() if isinstance(x, torch.Tensor) else x for x in leaves],
                                     "grads": None})
    return {"candidate": timing.to_dict(), "checked_trials": ids,
            "mode": "forward+backward" if runner.backward else "forward"}
