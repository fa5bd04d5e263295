"""`optimize` glue: the agent with the real verifier, memory and library; or, with no provider
configured, the offline path (a library kernel that computes the same function, verified on the
user's shapes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from kernelagent.problem import inspect_problem
from kernelagent.verifier.api import Verifier
from kernelagent.verifier.report import Report


@dataclass
class OfflineResult:
    problem: str
    matches: list[dict[str, Any]]
    chosen: str | None = None
    report: Report | None = None
    out_path: str | None = None
    provider_help: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return self.report is not None and self.report.accepted

    def to_dict(self) -> dict[str, Any]:
        return {"mode": "offline", "problem": self.problem, "matches": self.matches, "library_entry": self.chosen,
                "accepted": self.accepted, "out_path": self.out_path,
                "report": self.report.to_dict() if self.report else None, "provider_help": self.provider_help,
                "notes": self.notes}


def default_out(problem: str | Path, backend: str) -> Path:
    p = Path(problem)
    return p.with_name(f"{p.stem}_{backend}.py")


def offline_optimize(problem: str | Path, backend: str, verifier: Verifier, out: str | Path | None,
                     provider_help: str) -> OfflineResult:
    """Find a library kernel for the same function, verify it on the problem, write it to `out`."""
    from kernelagent.tools.library import get_entry, match_problem

    inspect_problem(problem)  # clear error for a bad file before any worker starts
    matches = match_problem(problem, verifier)
    result = OfflineResult(problem=str(problem), matches=matches, provider_help=provider_help)
    hits = [m for m in matches if m["match"]]
    if not hits:
        result.notes.append("no library kernel computes the same function; an LLM provider is needed to write one")
        return result
    for hit in hits:
        entry = get_entry(hit["name"])
        if backend not in entry.backends:
            result.notes.append(f"library entry {entry.name} matches but has no {backend} kernel")
            continue
        report = verifier.verify(problem, entry.backends[backend])
        result.chosen, result.report = entry.name, report
        if report.accepted:
            target = Path(out) if out else default_out(problem, backend)
            target.write_text(entry.backends[backend].read_text())
            result.out_path = str(target)
            return result
    return result


def make_verify_fn(verifier: Verifier):
    def verify_fn(problem: str, candidate: str, _options: Any = None) -> Report:
        return verifier.verify(problem, candidate)
    return verify_fn


def retrieve_with_library(store: Any, prepared: dict[str, Any], backend: str, limit: int) -> dict[str, Any]:
    """Memory's accepted kernels and lessons, topped up with library kernels of overlapping ops."""
    from kernelagent.agent.deps import memory_retrieve
    from kernelagent.tools.library import examples_for

    found = memory_retrieve(store, prepared, backend, limit)
    room = max(0, limit - len(found["examples"]))
    if room:
        found["examples"] = list(found["examples"]) + examples_for(prepared.get("op_signature", []), backend, room)
    return found


def build_deps(provider: Any, verifier: Verifier, store: Any, progress: Any = None) -> Any:
    from kernelagent.agent.deps import Deps
    from kernelagent.tools.prepare import prepare_with

    return Deps(provider=provider, verify_fn=make_verify_fn(verifier), store=store,
                prepare_fn=partial(prepare_with, verifier), retrieve_fn=retrieve_with_library,
                verify_options=verifier.options, progress=progress)
