"""The agent's `prepare` step with the real verifier: reference pack, audit, baselines, roofline floor.

Returns what the prompt and memory need: the aten op signature, baseline timings, the roofline
floor, the audit result and a short text for the LLM.
"""

from __future__ import annotations

from typing import Any

from kernelagent.problem import inspect_problem
from kernelagent.verifier.api import Verifier
from kernelagent.verifier.audit import advice, audit_pack
from kernelagent.verifier.measure.ceilings import load_ceilings
from kernelagent.verifier.measure.roofline import floor_ms


def _ms(x: float | None) -> str:
    return "n/a" if x is None else (f"{x * 1e3:.1f} us" if x < 1 else f"{x:.3f} ms")


def prepare_with(verifier: Verifier, problem_path: str) -> dict[str, Any]:
    spec = inspect_problem(problem_path)
    pack = verifier.reference(spec)
    meta = pack.meta
    audit = audit_pack(pack.dir, meta, pack.refs)
    audit["advice"] = advice(audit)
    work = meta.get("work") or {}
    gpu = pack.environment.get("gpu")
    floor = floor_ms(work, load_ceilings(gpu)) if gpu else None
    base = meta.get("baseline") or {}
    baseline = {k: base[k]["median_ms"] for k in ("eager", "compile") if base.get(k)}
    lines = [f"Inputs (main set): {meta['trials'][0].get('input_desc', '') if meta['trials'] else ''}",
             f"Work: {work.get('matmul_flops', 0):,} matrix FLOPs, {work.get('other_flops', 0):,} other FLOPs, "
             f"{work.get('min_bytes', 0):,} bytes at least (inputs + outputs + parameters once)"]
    if gpu:
        lines.append(f"GPU: {gpu}")
        lines += [f"PyTorch {name}: {_ms(ms)}" for name, ms in baseline.items()]
        if floor:
            lines.append(f"Roofline floor: {_ms(floor['floor_ms'])} ({floor['bound']}-bound; "
                         f"memory {_ms(floor['floors_ms']['memory'])}, matmul {_ms(floor['floors_ms']['matmul'])})")
    else:
        lines.append("No GPU here: candidates are checked for correctness under the Triton interpreter; speed is "
                     "not measured.")
    if audit["degenerate"]:
        lines.append(f"Warning: the problem looks degenerate ({audit['advice']}).")
    return {"op_signature": meta.get("op_signature", []), "baseline": baseline,
            "roofline": floor or {}, "audit": audit, "text": "\n".join(lines), "shapes": meta["trials"][0].get(
                "input_desc", "") if meta["trials"] else ""}
