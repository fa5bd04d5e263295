"""What an audit result means for the person who wrote the problem: the reasons and one line of advice."""

from __future__ import annotations

from typing import Any

from kernelagent.verifier.audit.probe import MIN_VARIATION


def reasons(result: dict[str, Any]) -> list[str]:
    """Why the main inputs are degenerate (empty when they are not)."""
    out = [f"`{name}` passes" for name in result.get("trivial_answers_that_pass") or []]
    var = (result.get("variation") or {}).get("inputs", result.get("output_variation_across_seeds"))
    if var is not None and var < MIN_VARIATION:
        out.append(f"new inputs change the output by only {var:.1e}")
    return out


def advice(result: dict[str, Any]) -> str:
    """One line: what to change in the problem, or that it is fine."""
    if result.get("error"):
        return ""
    if not result.get("degenerate"):
        return "not degenerate: trivial answers fail and the output changes with the inputs"
    passing = set(result.get("trivial_answers_that_pass") or [])
    tips = []
    if passing & {"zeros", "constant", "input mean"}:
        tips.append("the output is near zero or constant for these inputs: use inputs of larger scale or another "
                    "distribution (randn rather than rand), or drop a normalisation or softmax that washes it out")
    if passing & {"identity", "input broadcast"}:
        tips.append("returning an input passes: the op is (nearly) the identity for these inputs; pick inputs "
                    "where it changes the values")
    if any(p.startswith("parameter broadcast") for p in passing):
        tips.append("returning a parameter passes: a learned offset dominates the output; scale it down or the "
                    "inputs up")
    if "fixed output" in passing:
        tips.append("returning the output of other inputs passes: the output hardly depends on the inputs")
    var = (result.get("variation") or {}).get("inputs", result.get("output_variation_across_seeds"))
    if var is not None and var < MIN_VARIATION:
        tips.append(f"the output changes by only {var:.1e} with new inputs: make get_inputs() draw values that "
                    "matter to the result")
    return "; ".join(tips)
