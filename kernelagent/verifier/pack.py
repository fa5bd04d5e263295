"""A reference pack as the parent holds it: the folder candidates get (trial inputs, constructor
arguments, parameter states, meta) and, apart, the reference outputs only the parent reads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Pack:
    dir: Path                       # meta.json, init.pt, inputs_<t>.pt: linked into a candidate's `-in`
    meta: dict[str, Any]
    environment: dict[str, Any]
    seconds: float
    ref_dir: Path | None = None     # ref_<t>.pt, checks.pt, plan.json: never visible to a candidate
    secret: int | None = None       # the seed base its trials were drawn from

    @property
    def refs(self) -> Path:
        return self.ref_dir or self.dir / "ref"
