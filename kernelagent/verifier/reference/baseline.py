"""Timing facts of the reference, in the reference worker (GPU): how timed calls draw their inputs,
the baselines (eager and torch.compile) measured the same way as the candidate, and the fingerprints of
the reference on the draws the parent will check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch.utils import _pytree as pytree

from kernelagent.verifier import tensorio
from kernelagent.verifier.measure.fresh import (
    DrawMode,
    Fingerprinter,
    choose_mode,
    draw_inputs,
    grad_outputs_for,
    l2_norms,
    trainable,
    trainable_names,
    with_zeros,
)
from kernelagent.verifier.protocol import CheckPlan, TimingPlan
from kernelagent.verifier.worker.timed import time_model

if TYPE_CHECKING:
    from kernelagent.verifier.reference.run import ReferenceRunner


def _template_trial(meta: dict[str, Any]) -> int:
    main = [t for t in meta["trials"] if t["seed"] == 0 and t["set"] == 0 and t["state"] == 0 and t["dist"] == "native"]
    return (main or meta["trials"])[0]["id"]


def timing_spec(runner: ReferenceRunner, meta: dict[str, Any], plan: TimingPlan) -> dict[str, Any]:
    """Which trial's buffers the timed calls refill, and how each call draws its values."""
    mode = choose_mode(runner.problem.module.get_inputs, plan, runner.device)
    return {"template_trial": _template_trial(meta), "draws": {"kind": mode.kind, "pool": mode.pool,
                                                                   "fresh_every": mode.fresh_every},
            "draws_text": mode.describe(), "trainable": trainable_names(_model(runner))}


def _model(runner: ReferenceRunner) -> torch.nn.Module:
    init = tensorio.load(runner.pack / "init.pt", runner.device)
    model = runner.build_model(init["init_inputs"])
    model.load_state_dict(init["states"][0])
    return model


def time_baselines(runner: ReferenceRunner, meta: dict[str, Any], plan: TimingPlan) -> dict[str, Any]:
    """Eager and torch.compile on fresh draws, with the candidate's method."""
    spec = meta["timing"]
    template = tensorio.load(runner.pack / f"inputs_{spec['template_trial']}.pt", runner.device)["inputs"]
    mode = DrawMode(**spec["draws"])
    get_inputs = runner.problem.module.get_inputs
    model = _model(runner)
    out: dict[str, Any] = {"mode": "forward+backward" if runner.backward else "forward", "draws": mode.describe()}
    graph = False if runner.backward else None
    eager, _ = time_model(model, get_inputs, template, plan, mode, runner.device, runner.backward,
                          fingerprints=False, use_graph=graph)
    out["eager"] = eager.to_dict()
    try:
        compiled = torch.compile(model)
        timing, _ = time_model(compiled, get_inputs, template, plan, mode, runner.device, runner.backward,
                               fingerprints=False, use_graph=eager.method == "cuda_graph")
        out["compile"] = timing.to_dict()
    except Exception as e:  # noqa: BLE001 - torch.compile failing is a fact to report, not fatal
        out["compile_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
    return out


def check_prints(runner: ReferenceRunner, meta: dict[str, Any], plan: TimingPlan, checks: CheckPlan) -> None:
    """Fingerprints of the reference (native dtype and float64) on the draws at the checked positions,
    saved with the reference outputs (never in the pack the candidate sees)."""
    mode = DrawMode(**meta["timing"]["draws"])
    get_inputs = runner.problem.module.get_inputs
    model = _model(runner)
    m64 = _model(runner).to(torch.float64)
    printer = Fingerprinter(plan.mask_seed, plan.fingerprints, runner.device)
    native, f64, scales, floors = [], [], [], []
    for pos in checks.positions:
        seed = mode.seed_of(plan, pos)
        inputs = draw_inputs(get_inputs, seed, runner.device)
        a, gos = _call(model, inputs, runner.backward, plan.seed(pos))
        b, _ = _call(m64, pytree.tree_map(_up, inputs), runner.backward, plan.seed(pos), gos=[_up(g) for g in gos])
        native.append(printer(a))
        f64.append(printer(b))
        scales.append(l2_norms(b))
        floors.append(_floors(a, b))
    tensors = [x for x in a if isinstance(x, torch.Tensor)]
    tensorio.save(runner.ref_dir / "checks.pt", {
        "positions": list(checks.positions), "native": torch.stack(native).cpu(), "f64": torch.stack(f64).cpu(),
        "scales": torch.tensor(scales, dtype=torch.float64), "numel": [x.numel() for x in tensors],
        "floors": torch.tensor(floors, dtype=torch.float64), "dtypes": [str(x.dtype) for x in tensors]})


def _floors(native: list[Any], f64: list[Any]) -> list[float]:
    """The L2 norm of the reference's own error (native dtype against float64) per tensor leaf: what the
    judge's estimate of a timed call's error is held against (judge.timed.precision_held)."""
    real = tensorio.as_real
    return [float(torch.linalg.vector_norm((real(x.detach()).to(torch.float64) - real(y.detach()).to(torch.float64))
                                           .reshape(-1)))
            for x, y in zip(native, f64, strict=True) if isinstance(x, torch.Tensor)]


def _up(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.detach().to(torch.float64)
    return x


def _call(model: torch.nn.Module, inputs: list[Any], backward: bool, seed: int,
          gos: list[torch.Tensor] | None = None) -> tuple[list[Any], list[torch.Tensor]]:
    """The outputs (and the gradients of inputs and trainable parameters, None as zeros) of one call, as the
    candidate's timed call fingerprints them, and the upstream gradients used: drawn from `seed` unless
    given (the float64 run gets the native run's, upcast)."""
    if not backward:
        with torch.no_grad():
            return tensorio.flatten(model(*inputs))[0], []
    diff = [x for x in pytree.tree_leaves(inputs) if isinstance(x, torch.Tensor) and x.is_floating_point()]
    for x in diff:
        x.requires_grad_(True)
    out = model(*inputs)
    leaves = tensorio.flatten(out)[0]
    outs = [x for x in leaves if isinstance(x, torch.Tensor) and x.requires_grad]
    gos = grad_outputs_for(outs, seed) if gos is None else gos
    wrt = diff + trainable(model)
    grads = torch.autograd.grad(outs, wrt, gos, allow_unused=True)
    return [x.detach() if isinstance(x, torch.Tensor) else x for x in leaves] + with_zeros(grads, wrt), gos
