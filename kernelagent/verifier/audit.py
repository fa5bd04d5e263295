"""Problem audit: is the problem degenerate for its inputs?

A kernel that returns zeros, a constant, an input unchanged or the input's mean must not pass. If one
of those trivial answers passes the verifier's own comparison on every trial, or the output barely
changes across seeds, the problem cannot tell a real kernel from a cheat and must be strengthened.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from kernelagent.problem import ProblemError, inspect_problem
from kernelagent.verifier import tensorio
from kernelagent.verifier.judge.compare import compare_outputs, rel_l2
from kernelagent.verifier.options import VerifyOptions

MIN_SEED_VARIATION = 1e-3  # relative L2 change of the output between seeds below which it is "constant"


def _constants(first_out: list[Any]) -> list[Any]:
    """One constant per output, taken from the first trial and reused for all: a constant answer must
    not depend on the inputs (for a 0-dim loss, the output's own mean would be the answer itself)."""
    out = []
    for x in first_out:
        if isinstance(x, torch.Tensor) and x.numel():
            flat = x.detach().flatten()
            out.append(float(flat.double().mean()) if x.is_floating_point() else int(flat.mode().values))
        else:
            out.append(None)
    return out


def _trivial_answers(ref_out: list[Any], inputs: list[Any], constants: list[Any]) -> dict[str, list[Any]]:
    """Cheap answers a kernel could return without computing: zeros, a fixed constant, an input as is,
    the input's mean. A non-tensor output makes that answer impossible to fake, so it is dropped."""
    tensors_in = [x.detach() for x in inputs if isinstance(x, torch.Tensor)]
    floats_in = [x for x in tensors_in if x.is_floating_point()]
    answers: dict[str, list[Any]] = {"zeros": [], "constant": [], "identity": [], "input mean": []}
    for out, c in zip(ref_out, constants, strict=True):
        if not isinstance(out, torch.Tensor):
            return {}
        answers["zeros"].append(torch.zeros_like(out))
        answers["constant"].append(torch.full_like(out, c) if c is not None else None)
        same = next((x for x in tensors_in if x.shape == out.shape), None)
        answers["identity"].append(same.to(out.dtype) if same is not None else None)
        mean = float(floats_in[0].double().mean()) if floats_in else None
        answers["input mean"].append(torch.full_like(out, mean) if mean is not None and out.is_floating_point()
                                     else None)
    return {k: v for k, v in answers.items() if all(x is not None for x in v)}


def audit_pack(pack_dir: Path, meta: dict[str, Any], ref_dir: Path | None = None) -> dict[str, Any]:
    """Which trivial answers pass on every trial, and how much the output varies across seeds."""
    tol = meta["problem"].get("tolerance")
    device = "cuda" if meta.get("device") == "cuda" else "cpu"
    passing: dict[str, bool] = {}
    by_set: dict[int, list[list[Any]]] = {}
    constants: dict[str, list[Any]] = {}
    for trial in meta["trials"]:
        ref = tensorio.load((ref_dir or pack_dir / "ref") / f"ref_{trial['id']}.pt", device)
        inputs = tensorio.load(pack_dir / f"inputs_{trial['id']}.pt", device)["inputs"]
        consts = constants.setdefault(trial.get("structure", ""), _constants(ref["native"]))
        for name, answer in _trivial_answers(ref["native"], inputs, consts).items():
            ok = compare_outputs(trial, answer, {"native": ref["native"], "f64": ref.get("f64")}, tol).ok
            passing[name] = passing.get(name, True) and ok
        by_set.setdefault(trial["set"], []).append(ref["native"])
    variation = _seed_variation(by_set)
    trivial = sorted(k for k, v in passing.items() if v)
    constant = variation is not None and variation < MIN_SEED_VARIATION
    return {"degenerate": bool(trivial) or constant, "trivial_answers_that_pass": trivial,
            "output_variation_across_seeds": variation, "trials": len(meta["trials"])}


def _seed_variation(by_set: dict[int, list[list[Any]]]) -> float | None:
    values = []
    for outs in by_set.values():
        if len(outs) < 2:
            continue
        a, b = outs[0], outs[1]
        for x, y in zip(a, b, strict=False):
            if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.shape == y.shape \
                    and x.is_floating_point():
                values.append(rel_l2(y.double(), x.double()))
    return min(values) if values else None


def audit_problem(path: str | Path, options: VerifyOptions | None = None) -> dict[str, Any]:
    """Run the reference on fresh trials and audit them (the CLI's `audit`)."""
    from kernelagent.verifier.api import ReferenceFailure, Verifier

    options = options or VerifyOptions(timing=False)
    options.timing = False
    try:
        spec = inspect_problem(path)
    except ProblemError as e:
        return {"problem": str(path), "error": str(e), "degenerate": False}
    with Verifier(options) as v:
        try:
            pack = v.reference(spec)
        except ReferenceFailure as e:
            return {"problem": str(path), "error": e.report.message, "degenerate": False}
        result = audit_pack(pack.dir, pack.meta, pack.refs)
    result.update(problem=str(path), name=spec.name, advice=advice(result))
    return result


def advice(result: dict[str, Any]) -> str:
    if not result.get("degenerate"):
        return "not degenerate: trivial answers fail and the output changes with the inputs"
    tips = []
    if "zeros" in result["trivial_answers_that_pass"] or "constant" in result["trivial_answers_that_pass"]:
        tips.append("the output is near zero or constant for these inputs: use inputs of larger scale or "
                    "another distribution (randn rather than rand), or drop a normalisation that washes it out")
    if "identity" in result["trivial_answers_that_pass"]:
        tips.append("returning the input passes: the op is (nearly) the identity for these inputs; "
                    "pick inputs where it changes the values")
    if "input mean" in result["trivial_answers_that_pass"]:
        tips.append("returning the input's mean passes: the output carries little information")
    var = result.get("output_variation_across_seeds")
    if var is not None and var < MIN_SEED_VARIATION:
        tips.append(f"the output changes by only {var:.1e} across seeds: make get_inputs() draw values "
                    "that matter to the result")
    return "; ".join(tips)
