"""What an audit compares with (the tolerance) and how it runs (device, draws, seeds, limits).

Tolerances: `ours` is the verifier's own rule (the problem's TOLERANCE, else per-dtype bounds around the
float64 reference's noise floor); `kernelbench` is KernelBench's check, `torch.allclose(ref, answer,
atol=1e-2, rtol=1e-2)` against the reference in its own dtype (KernelBench v0.1 for every dtype, and its
current fp16/bf16 value); `kernelbench-fp32` is its current fp32 value (1e-4). Explicit atol/rtol compare
the same way as KernelBench. Standard library only: the parent and the audit child both read it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Tolerance:
    name: str                 # ours | kernelbench | kernelbench-fp32 | custom
    kind: str = "ours"        # ours (the verifier's rule) | allclose (|ref - answer| <= atol + rtol * |answer|)
    atol: float = 0.0
    rtol: float = 0.0

    def describe(self) -> str:
        if self.kind == "ours":
            return "ours (the verifier's rule: the problem's TOLERANCE, else per-dtype bounds around the float64 " \
                   "reference)"
        return f"{self.name} (torch.allclose, atol={self.atol:g}, rtol={self.rtol:g})"


TOLERANCES = {
    "ours": Tolerance("ours"),
    "kernelbench": Tolerance("kernelbench", "allclose", 1e-2, 1e-2),
    "kernelbench-fp32": Tolerance("kernelbench-fp32", "allclose", 1e-4, 1e-4),
}


def tolerance_from(name: str = "ours", atol: float | None = None, rtol: float | None = None) -> Tolerance:
    """The named tolerance, or an allclose one when atol or rtol is given (the other defaults to 0)."""
    if atol is not None or rtol is not None:
        values = {"atol": atol or 0.0, "rtol": rtol or 0.0}
        if any(v < 0 for v in values.values()):
            raise ValueError("--atol and --rtol must be >= 0")
        return Tolerance("custom", "allclose", **values)
    if name not in TOLERANCES:
        raise ValueError(f"unknown tolerance {name!r}; choose one of {', '.join(TOLERANCES)}")
    return TOLERANCES[name]


@dataclass(frozen=True)
class AuditSettings:
    device: str = "cpu"              # cpu | cuda (resolved: never auto)
    draws: int = 3                   # input draws per input set (the trivial answers must pass on every one)
    tolerance: Tolerance = field(default_factory=lambda: TOLERANCES["ours"])
    seed: int = 0                    # seed base: audits are reproducible
    timeout: float = 600.0           # seconds for one problem's audit (after sizing and admission)
    threads: int = 0                 # CPU threads for the child (0: torch's default)

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> AuditSettings:
        return AuditSettings(**{**d, "tolerance": Tolerance(**d["tolerance"])})

    def key(self) -> str:
        """What a stored result depends on (not the limits): results with another key are re-audited."""
        fields = {"device": self.device, "draws": self.draws, "tolerance": asdict(self.tolerance), "seed": self.seed}
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]
