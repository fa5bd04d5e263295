"""The verifier's report: verdict, category, stages, metrics, and the feedback written for the LLM.

The report is plain data (dataclasses that round-trip through JSON) so that the CLI's `--json`
output, the agent's feedback and the memory rows all read the same object.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 2  # 2: the verdict `unverified` (category `compile_only`)

# Every verdict a report can carry; `verdict_of` says which category gives which.
VERDICTS: dict[str, str] = {
    "accepted": "correct on every trial and every integrity check passed (category `ok`)",
    "unverified": "compiled, but never run: no GPU here, so no output was compared (category `compile_only`); "
                  "not an acceptance",
    "rejected": "any other category: what failed is named by the category",
}

# Every category a report can carry. `ok` is the only one with verdict `accepted`, `compile_only` the only
# one with verdict `unverified`.
CATEGORIES: dict[str, str] = {
    "ok": "accepted: correct on every trial and every integrity check passed",
    "compile_only": "unverified: a CuTe DSL kernel compiled for sm_90a and its launches were reached, but without a "
                    "GPU it never ran, so correctness is unknown",
    "load_error": "a file could not be loaded (syntax error, import error, missing Model/ModelNew/get_inputs)",
    "policy_violation": "the candidate's source breaks a rule (PyTorch compute, I/O, introspection, ...)",
    "compile_error": "the kernel failed to compile",
    "runtime_error": "the candidate raised, crashed, died by a signal or ran out of memory",
    "timeout": "the candidate ran past the wall-clock limit",
    "mismatch": "outputs differ from the reference beyond tolerance (or wrong shape, dtype, device)",
    "nan_inf": "outputs hold NaN or Inf where the reference is finite",
    "nondeterministic": "two runs on the same inputs disagree",
    "fallback_to_reference": "the forward pass computed with PyTorch ops instead of its own kernel",
    "no_kernel_launched": "the forward pass launched none of the candidate's own kernels",
    "input_mutation": "the candidate wrote into its inputs",
    "stale_memory": "outputs hold memory the candidate never wrote",
    "caching_detected": "outputs did not follow new values written into the same input buffers",
    "timing_violation": "while timed, calls returned answers they did not compute for their inputs, launched no "
                        "kernel, or took less time than the hardware allows: work was remembered or skipped",
    "stream_violation": "work ran on a stream the timing did not see",
    "internal_error": "the verifier itself failed; the candidate is not to blame",
}

# Order in which a failing category wins when several apply (most specific first).
CATEGORY_PRIORITY = [
    "load_error", "policy_violation", "compile_error", "timeout", "runtime_error",
    "input_mutation", "stale_memory", "caching_detected", "stream_violation", "timing_violation",
    "fallback_to_reference", "no_kernel_launched", "nondeterministic", "nan_inf", "mismatch",
]


def verdict_of(category: str) -> str:
    """The verdict a category carries: the one place this is decided (accepted, unverified or rejected)."""
    if category == "ok":
        return "accepted"
    return "unverified" if category == "compile_only" else "rejected"


@dataclass
class Stage:
    """One verifier stage: its name, status (passed|failed|skipped|warning), time and details."""

    name: str
    status: str
    seconds: float = 0.0
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Report:
    verdict: str = "rejected"
    category: str = "internal_error"
    message: str = ""
    feedback: str = ""
    problem: dict[str, Any] = field(default_factory=dict)
    candidate: dict[str, Any] = field(default_factory=dict)
    stages: list[Stage] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    blame: str = "candidate"  # candidate | problem | verifier
    schema: int = SCHEMA_VERSION
    created: str = field(default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))

    @property
    def accepted(self) -> bool:
        return self.verdict == "accepted"

    @property
    def unverified(self) -> bool:
        """Compiled but never run (no GPU): neither accepted nor rejected, and never to be taken for either."""
        return self.verdict == "unverified"

    def stage(self, name: str) -> Stage | None:
        return next((s for s in self.stages if s.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["stages"] = [Stage(**s) for s in data.get("stages", [])]
        return cls(**kwargs)


def rejected(category: str, message: str, **kw: Any) -> Report:
    """A rejected report; `category` must be one of CATEGORIES that rejects (not `ok`, not `compile_only`)."""
    assert category in CATEGORIES and verdict_of(category) == "rejected", category
    return Report(verdict="rejected", category=category, message=message, **kw)
