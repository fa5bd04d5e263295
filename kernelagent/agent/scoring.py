"""Reading a verifier report (as a dict) for ranking: speed, whether it was measured, how close a miss was.

The metric names are the verifier's (`candidate_ms`, `eager_ms`, `compile_ms`, `speedup_eager`,
`speedup_compile`, `roofline_pct`, `roofline_bound`); this is the one place the agent reads them.
"""

from __future__ import annotations

from typing import Any

# How close a rejected candidate came: ran and produced numbers > crashed > did not compile > broke rules.
# `compile_only` (verdict unverified: compiled and reached its launches, never run for want of a GPU) ranks
# as a miss, above any failure it could be told apart from on the same machine.
CLOSENESS = {
    "mismatch": 5, "nan_inf": 5, "compile_only": 4, "nondeterministic": 4, "runtime_error": 3, "timeout": 3,
    "compile_error": 2, "fallback_to_reference": 2, "no_kernel_launched": 2, "input_mutation": 2,
    "stale_memory": 2, "caching_detected": 2, "stream_violation": 2, "policy_violation": 1,
    "load_error": 1, "internal_error": 0,
}


def metric(report: dict[str, Any] | None, key: str) -> float | None:
    """A numeric metric of the report, or None."""
    value = ((report or {}).get("metrics") or {}).get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def accepted(report: dict[str, Any] | None) -> bool:
    return bool(report) and report.get("verdict") == "accepted"


def unverified(report: dict[str, Any] | None) -> bool:
    """Compiled but never run (no GPU): not accepted, and not a failure to repair either."""
    return bool(report) and report.get("verdict") == "unverified"


def speed_measured(report: dict[str, Any] | None) -> bool:
    """True when the verifier timed the candidate against eager (False on CPU, where timing is skipped)."""
    env = (report or {}).get("environment") or {}
    if str(env.get("device", "")).lower() == "cpu":
        return False
    return metric(report, "candidate_ms") is not None and metric(report, "speedup_eager") is not None


def score(report: dict[str, Any] | None) -> tuple[int, float]:
    """Sort key, higher is better: (tier, value). Tiers: 3 timed pass, 2 untimed pass, 1 miss (an unverified
    kernel included), 0 none."""
    if report is None:
        return (0, 0.0)
    if accepted(report):
        return (3, metric(report, "speedup_eager") or 0.0) if speed_measured(report) else (2, 0.0)
    return (1, float(CLOSENESS.get(report.get("category", ""), 0)))


def speedup(report: dict[str, Any] | None) -> float | None:
    return metric(report, "speedup_eager") if speed_measured(report) else None
