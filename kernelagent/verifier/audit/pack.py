"""`audit_pack`: the audit from a verifier's reference pack (the agent's prepare step, no extra process).

The pack's trials were drawn for verification: the main set under the problem's own parameters and under
parameters the verifier re-drew, plus a second input distribution and edge-case sets. Only the main set's
native-distribution trials decide `degenerate`; other sets give notes. Variation is measured between
trials with the same parameters where the pack has them (`inputs`), else across re-drawn ones (`both`,
which mostly measures the changed weights).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from kernelagent.verifier import tensorio
from kernelagent.verifier.audit.answers import constants, trivial_answers
from kernelagent.verifier.audit.compare import Reference, passes, rel_l2
from kernelagent.verifier.audit.probe import MIN_VARIATION
from kernelagent.verifier.audit.settings import TOLERANCES


def _params(pack_dir: Path, state: int, device: str) -> list[tuple[str, torch.Tensor]]:
    try:
        states = tensorio.load(pack_dir / "init.pt", device).get("states") or []
    except (OSError, RuntimeError, ValueError):
        return []
    if state >= len(states):
        return []
    return [(n, t) for n, t in states[state].items() if isinstance(t, torch.Tensor) and t.is_floating_point()]


def _audit_set(trials: list[dict[str, Any]], pack_dir: Path, ref_dir: Path, device: str,
               tol: dict[str, float] | None) -> dict[str, Any]:
    passing: dict[str, bool] = {}
    first: dict[str, Any] | None = None
    consts: list[Any] = []
    var: dict[str, list[float]] = {"inputs": [], "both": []}
    for k, trial in enumerate(trials):
        ref = tensorio.load(ref_dir / f"ref_{trial['id']}.pt", device)
        inputs = tensorio.load(pack_dir / f"inputs_{trial['id']}.pt", device)["inputs"]
        native, f64 = ref["native"], ref.get("f64") or [None] * len(ref["native"])
        if first is None:
            first, consts = {"out": native, "state": trial.get("state", 0)}, constants(native)
        else:
            kind = "inputs" if trial.get("state", 0) == first["state"] else "both"
            values = [v for v in (rel_l2(a, b) for a, b in zip(native, first["out"], strict=False)) if v is not None]
            if values:
                var[kind].append(min(values))
        refs = [Reference(a, b) for a, b in zip(native, f64, strict=False)]
        tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
        params = _params(pack_dir, trial.get("state", 0), device)
        seen = set()
        for name, build in trivial_answers(native, tensors, params, consts, first["out"] if k else None):
            seen.add(name)
            if passing.get(name, not k or name == "fixed output") is False:
                passing[name] = False
                continue
            passing[name] = all(passes(r, a, TOLERANCES["ours"], tol) for r, a in zip(refs, build(), strict=True))
        for name in passing:
            passing[name] = passing[name] and name in seen
    return {"passing": sorted(n for n, ok in passing.items() if ok),
            "inputs": min(var["inputs"], default=None), "both": min(var["both"], default=None),
            "desc": trials[0].get("input_desc", "") if trials else ""}


def audit_pack(pack_dir: Path, meta: dict[str, Any], ref_dir: Path | None = None) -> dict[str, Any]:
    """Which trivial answers pass on every main-set trial, and how much the output varies between them."""
    tol = meta["problem"].get("tolerance")
    device = "cuda" if meta.get("device") == "cuda" else "cpu"
    ref_dir = ref_dir or pack_dir / "ref"
    plain = [t for t in meta["trials"] if t.get("dist", "native") == "native" and not t.get("timing")]
    by_set: dict[int, list[dict[str, Any]]] = {}
    for t in plain:
        by_set.setdefault(t["set"], []).append(t)
    main_set = min(by_set, default=0)
    main = _audit_set(by_set.get(main_set, []), pack_dir, ref_dir, device, tol)
    notes = []
    for s, trials in sorted(by_set.items()):
        if s == main_set:
            continue
        other = _audit_set(trials, pack_dir, ref_dir, device, tol)
        low = other["inputs"] is not None and other["inputs"] < MIN_VARIATION
        if other["passing"] or low:
            why = ", ".join(other["passing"]) + " pass" if other["passing"] else "the output barely varies"
            notes.append(f"test input set {s} ({other['desc']}) is degenerate ({why}): an edge case, not a verdict")
    low = main["inputs"] is not None and main["inputs"] < MIN_VARIATION
    variation = main["inputs"] if main["inputs"] is not None else main["both"]
    return {"degenerate": bool(main["passing"]) or low, "trivial_answers_that_pass": main["passing"],
            "variation": {"inputs": main["inputs"], "parameters": None, "both": main["both"]},
            "output_variation_across_seeds": variation, "notes": notes, "trials": len(meta["trials"]),
            "status": "ok"}
