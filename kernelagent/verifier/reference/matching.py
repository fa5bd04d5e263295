"""Does a library entry compute the same function as a problem? (worker role `match`)

Both references run on the same random inputs, the library's Model built with the problem's
constructor arguments and the problem's parameters copied in (by name, else by shape in order).
Two draws of the inputs, compared with the verifier's own tolerances: same outputs means same
function, whatever the code looks like. An entry whose reference takes options beside its inputs (attention's
causal flag) lists the option sets worth trying as `MATCH_PRESETS` (keyword arguments); the first that gives the
problem's outputs is the match, and the result names it so the kernel written for the problem can bind it.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelagent.problem import ProblemError, load_problem
from kernelagent.verifier import tensorio
from kernelagent.verifier.judge.compare import compare_outputs
from kernelagent.verifier.protocol import MatchRequest
from kernelagent.verifier.rng import seed_all


def _smallest_set(problem: Any, device: str, cap: int) -> list[Any]:
    with torch.device(device):
        sets = problem.input_sets()
    sizes = [sum(x.numel() for x in s if isinstance(x, torch.Tensor)) for s in sets]
    small = [s for s, n in zip(sets, sizes, strict=True) if n <= cap]
    return tensorio.move(small[0] if small else sets[sizes.index(min(sizes))], device)


def _copy_params(src: torch.nn.Module, dst: torch.nn.Module) -> bool:
    """Copy by name where names agree, else by shape in declaration order; False if dst has leftovers."""
    s_named, d_named = dict(src.state_dict()), dict(dst.state_dict())
    if set(s_named) == set(d_named):
        dst.load_state_dict(s_named)
        return True
    s_vals, d_keys = list(s_named.values()), list(d_named)
    if len(s_vals) != len(d_keys) or any(v.shape != d_named[k].shape for v, k in zip(s_vals, d_keys, strict=True)):
        return False
    dst.load_state_dict(dict(zip(d_keys, s_vals, strict=True)))
    return True


def _build(cls: type, args: list[Any], device: str) -> torch.nn.Module | None:
    try:
        with torch.device(device):
            return cls(*args).to(device)
    except Exception:  # noqa: BLE001 - a constructor that does not accept these arguments does not fit
        return None


def _presets(lib: Any) -> list[dict[str, Any]]:
    """The option sets to try the entry's reference with (keyword arguments after the problem's inputs): its
    MATCH_PRESETS, else none but the inputs alone."""
    found = getattr(lib.module, "MATCH_PRESETS", None)
    ok = isinstance(found, list) and found and all(isinstance(p, dict) for p in found)
    return [dict(p) for p in found] if ok else [{}]  # (a malformed list: the inputs alone, for this entry only)


def _agrees(problem: Any, user: torch.nn.Module, ref: torch.nn.Module, options: dict[str, Any], device: str,
            seed: int, cap: int) -> tuple[bool, str]:
    """Whether ref(*inputs, **options) gives user(*inputs) on two draws of the problem's smallest input set."""
    for draw in range(2):
        seed_all(seed + 17 * (draw + 1))
        inputs = _smallest_set(problem, device, cap)
        try:
            with torch.no_grad():
                a = tensorio.flatten(user(*tensorio.clone_leaves(inputs)))[0]
                b = tensorio.flatten(ref(*tensorio.clone_leaves(inputs), **options))[0]
        except Exception as e:  # noqa: BLE001 - a forward that rejects these inputs does not fit
            return False, f"forward does not fit: {type(e).__name__}"
        res = compare_outputs({"structure": ""}, tensorio.to_cpu(b), {"native": tensorio.to_cpu(a)}, None)
        if not res.ok:
            worst = res.worst
            return False, worst.summary() if worst else res.structure_msg
    return True, "same outputs on two random input draws"


def _same_function(problem: Any, lib: Any, device: str, seed: int, cap: int) -> tuple[bool, str, dict[str, Any]]:
    """(match, why, the options it takes) over the entry's presets, the first that agrees."""
    seed_all(seed)
    init = problem.init_inputs()
    user = _build(problem.model_cls, init, device)
    if user is None:
        return False, "the problem's Model could not be built", {}
    ref = _build(lib.model_cls, init, device)
    if ref is None:
        ref = _build(lib.model_cls, lib.init_inputs(), device)
    if ref is None or not _copy_params(user, ref):
        return False, "constructor or parameters do not fit", {}
    first = ""
    for options in _presets(lib):
        ok, why = _agrees(problem, user, ref, options, device, seed, cap)
        if ok:
            return True, why, options
        first = first or why
    return False, first, {}  # why the inputs alone (the first preset) did not fit


def run_match(req: MatchRequest) -> dict[str, Any]:
    problem = load_problem(req.problem, "kernelagent_problem")
    results = []
    for i, entry in enumerate(req.entries):
        try:
            lib = load_problem(entry["reference"], f"kernelagent_library_ref_{i}")
        except ProblemError as e:
            results.append({"name": entry["name"], "match": False, "why": str(e)[:200]})
            continue
        ok, why, options = _same_function(problem, lib, req.device, int(req.seed), int(req.cap))
        results.append({"name": entry["name"], "match": ok, "why": why, "options": options})
    return {"results": results}
