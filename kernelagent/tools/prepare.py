"""The agent's `prepare` step with the real verifier: reference pack, audit, baselines, roofline floor.

Returns what the prompt and memory need: the aten op signature, baseline timings, the roofline floor,
the audit result and a short text for the LLM that is true on the machine that verifies: which input
set is the main one and which sets were run or skipped, reference timings and the roofline only where
there is a GPU, the audit's warning only when the audit calls the problem degenerate.
"""

from __future__ import annotations

from typing import Any

from kernelagent.problem import ProblemError, inspect_problem
from kernelagent.verifier.api import ReferenceFailure, Verifier
from kernelagent.verifier.audit import advice, audit_pack
from kernelagent.verifier.measure.ceilings import load_ceilings
from kernelagent.verifier.measure.roofline import floor_ms

MAIN_SET = 0  # get_inputs(); get_test_inputs() sets follow


def _ms(x: float | None) -> str:
    return "n/a" if x is None else (f"{x * 1e3:.1f} us" if x < 1 else f"{x:.3f} ms")


def set_descriptions(meta: dict[str, Any]) -> dict[int, str]:
    """Input set index -> its description, for the sets the reference ran (timing trials left out)."""
    out: dict[int, str] = {}
    for t in meta.get("trials", []):
        if not t.get("timing"):
            out.setdefault(int(t.get("set", 0)), t.get("input_desc", ""))
    return out


def input_lines(meta: dict[str, Any]) -> list[str]:
    """The main set and its sizes, the other sets run, and what was skipped here (the reference's notes)."""
    sets = set_descriptions(meta)
    if MAIN_SET in sets:
        lines = [f"Main inputs (get_inputs): {sets[MAIN_SET]}"]
    else:
        lines = ["Main inputs (get_inputs): not run on this machine (see the note below); they are checked "
                 "where there is a GPU"]
    others = [f"set {k}: {v}" for k, v in sorted(sets.items()) if k != MAIN_SET]
    if others:
        lines.append("Other input sets checked here (get_test_inputs): " + "; ".join(others))
    lines += [f"Note: {n}" for n in meta.get("notes", []) if "skipped" in n]
    return lines


def work_line(meta: dict[str, Any]) -> str | None:
    """FLOPs and bytes, labelled with the input set they were counted on."""
    work, trials = meta.get("work") or {}, meta.get("trials") or []
    if not work or not trials:
        return None
    which = int(trials[0].get("set", 0))
    label = "the main inputs" if which == MAIN_SET else f"input set {which} (the main inputs were not run here)"
    return (f"Work on {label}: {work.get('matmul_flops', 0):,} matrix FLOPs, {work.get('other_flops', 0):,} other "
            f"FLOPs, {work.get('min_bytes', 0):,} bytes at least (inputs + outputs + parameters once)")


def gpu_lines(gpu: str, baseline: dict[str, float], floor: dict[str, Any] | None) -> list[str]:
    lines = [f"GPU: {gpu}"] + [f"PyTorch {name} on the main inputs: {_ms(ms)}" for name, ms in baseline.items()]
    if floor:
        lines.append(f"Roofline floor: {_ms(floor['floor_ms'])} ({floor['bound']}-bound; "
                     f"memory {_ms(floor['floors_ms']['memory'])}, matmul {_ms(floor['floors_ms']['matmul'])})")
    return lines


def degenerate_line(meta: dict[str, Any], audit: dict[str, Any]) -> str:
    """The audit's verdict, naming the input set it judged (the main one unless that was not run here)."""
    sets = set_descriptions(meta)
    judged = min(sets, default=MAIN_SET)
    what = "the main inputs" if judged == MAIN_SET else f"input set {judged} (the main inputs were not run here)"
    return f"Warning: the audit finds the problem degenerate on {what}: {audit.get('advice', '')}."


CPU_LINE = ("No GPU on the machine that verifies: candidates are checked for correctness only (Triton under its "
            "interpreter, CuTe DSL compiled but not run); speed is not measured, so no reference timings or "
            "roofline are given.")


def prepare_with(verifier: Verifier, problem_path: str) -> dict[str, Any]:
    """Run the reference once and describe the problem truthfully for this machine (see the module docstring)."""
    spec = inspect_problem(problem_path)
    try:
        pack = verifier.reference(spec)
    except ReferenceFailure as failure:
        raise ProblemError(f"the reference {spec.name} could not run: {failure.report.message}",
                           path=str(spec.path)) from failure
    meta = pack.meta
    audit = audit_pack(pack.dir, meta, pack.refs)
    audit["advice"] = advice(audit)
    gpu = pack.environment.get("gpu")
    base = meta.get("baseline") or {}
    baseline = {k: base[k]["median_ms"] for k in ("eager", "compile") if base.get(k)} if gpu else {}
    floor = floor_ms(meta.get("work") or {}, load_ceilings(gpu)) if gpu else None
    lines = input_lines(meta) + [x for x in [work_line(meta)] if x]
    lines += gpu_lines(gpu, baseline, floor) if gpu else [CPU_LINE]
    if audit.get("degenerate"):
        lines.append(degenerate_line(meta, audit))
    main = set_descriptions(meta).get(MAIN_SET, "")
    return {"op_signature": meta.get("op_signature", []), "baseline": baseline, "roofline": floor or {},
            "audit": audit, "text": "\n".join(lines), "shapes": main, "gpu": gpu}
