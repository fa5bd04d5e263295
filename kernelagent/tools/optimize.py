"""`optimize` glue: the agent with the real verifier, memory and library; or, with no provider
configured, the offline path (a library kernel that computes the same function, verified on the
user's shapes, recorded in memory like any other verification).
"""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from kernelagent.problem import inspect_problem
from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
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
    options: dict[str, Any] = field(default_factory=dict)  # the chosen entry's options, bound in its kernel
    checked: list[str] = field(default_factory=list)       # what the offline path did check, in words
    not_checked: list[str] = field(default_factory=list)   # and what it did not
    run_id: str | None = None

    @property
    def accepted(self) -> bool:
        return self.report is not None and self.report.accepted

    @property
    def unverified(self) -> bool:
        """The library kernel compiled but could not be run (no GPU): not accepted, and not written."""
        return self.report is not None and self.report.unverified

    def to_dict(self) -> dict[str, Any]:
        return {"mode": "offline", "problem": self.problem, "matches": self.matches, "library_entry": self.chosen,
                "options": self.options,
                "accepted": self.accepted, "unverified": self.unverified, "out_path": self.out_path,
                "report": self.report.to_dict() if self.report else None, "provider_help": self.provider_help,
                "notes": self.notes, "checked": self.checked, "not_checked": self.not_checked,
                "run_id": self.run_id}


def default_out(problem: str | Path, backend: str) -> Path:
    p = Path(problem)
    return p.with_name(f"{p.stem}_{backend}.py")


def offline_optimize(problem: str | Path, backend: str, verifier: Verifier, out: str | Path | None,
                     provider_help: str, store: Any = None) -> OfflineResult:
    """Find a library kernel for the same function, verify it on the problem, write it to `out`. A match found
    with one of the entry's option presets (attention's causal flag) is verified and written with them bound."""
    from kernelagent.tools.library import match_problem

    inspect_problem(problem)  # clear error for a bad file before any worker starts
    matches = match_problem(problem, verifier)
    result = OfflineResult(problem=str(problem), matches=matches, provider_help=provider_help)
    hits = [m for m in matches if m["match"]]
    if not hits:
        result.notes.append("no library kernel computes the same function; an LLM provider is needed to write one")
    with tempfile.TemporaryDirectory(prefix="kernelagent_offline_") as scratch:  # a bound kernel's file
        for hit in hits:
            if _try_entry(hit, problem, backend, verifier, out, Path(scratch), result):
                break
        describe_checks(result, len(matches))
        if store is not None:
            result.run_id = record_offline(store, problem, backend, result)
    return result


def _try_entry(hit: dict[str, Any], problem: str | Path, backend: str, verifier: Verifier, out: str | Path | None,
               scratch: Path, result: OfflineResult) -> bool:
    """Verify one matching entry's kernel (a declared preset bound, if the match named one) on the problem; write
    that same source beside the problem when accepted. True when written."""
    from kernelagent.kernels import LibraryError
    from kernelagent.problem import sha256_text
    from kernelagent.tools.library import get_entry
    from kernelagent.tools.presets import bound_kernel

    entry = get_entry(hit["name"])
    if backend not in entry.backends:
        result.notes.append(f"library entry {entry.name} matches but has no {backend} kernel")
        return False
    kernel, options = entry.backends[backend], hit.get("options") or {}
    try:
        source = bound_kernel(entry, backend, options)  # checks the options name a declared preset
    except LibraryError as e:
        result.notes.append(str(e))
        return False
    if options:
        kernel = scratch / kernel.name
        kernel.write_text(source)
    report = verifier.verify(problem, kernel)
    result.chosen, result.report, result.options = entry.name, report, options
    if not report.accepted:
        return False
    if report.candidate.get("sha256") != sha256_text(source):
        result.notes.append(f"{kernel} changed while it was verified: not written")
        return False
    target = Path(out) if out else default_out(problem, backend)
    target.write_text(source)
    result.out_path = str(target)
    return True


def describe_checks(result: OfflineResult, compared: int) -> None:
    """Fill `checked` and `not_checked`: what this offline run established, and what it could not."""
    result.checked.append(f"compared the problem with {compared} library reference(s) on the same inputs")
    result.not_checked.append("no new kernel was written: no LLM provider is configured")
    report = result.report
    if report is None:
        return
    trials = report.metrics.get("trials")
    verdict = ("accepted" if report.accepted else "compiled, but not run (no GPU): not verified, not written"
               if report.unverified else f"rejected ({report.category})")
    from kernelagent.tools.presets import options_text

    bound = options_text(result.options)
    result.checked.append(f"verified the library kernel {result.chosen}" + (f" ({bound} bound)" if bound else "")
                          + f" on your problem: {verdict}" + (f" over {trials} trials" if trials else ""))
    for stage in report.stages:
        for note in (stage.details or {}).get("notes", []):
            if "skipped" in note:
                result.not_checked.append(note)
    if report.metrics.get("speedup_eager") is None:
        where = "no GPU here" if report.environment.get("device") == "cpu" else "timing was skipped"
        result.not_checked.append(f"speed was not measured ({where})")


def record_offline(store: Any, problem: str | Path, backend: str, result: OfflineResult) -> str:
    """The offline run in memory: a run row (provider `offline`) and the library kernel's verification."""
    spec = inspect_problem(problem)
    problem_id = store.upsert_problem(name=spec.name, source=spec.source)
    run_id = store.start_run(problem_id=problem_id, provider="offline", model=f"library:{result.chosen or '-'}",
                             backend=backend, budget={}, config={"mode": "offline"})
    attempt_id = None
    if result.report is not None:
        source = Path(result.report.candidate.get("path") or "").read_text() if result.report.candidate else ""
        attempt_id = store.record_attempt(run_id=run_id, problem_id=problem_id, source=source, report=result.report)
    status = "no_match" if result.report is None else result.report.verdict  # accepted | unverified | rejected
    store.update_run(run_id, status=status, finished=True,
                     best_attempt_id=attempt_id if result.accepted else None)
    return run_id


def make_verify_fn(verifier: Verifier) -> Callable[[str, str, VerifyOptions | None], Report]:
    """verify_fn for the agent: the options it passes (backend, a timeout under the GPU budget) are honoured."""
    def verify_fn(problem: str, candidate: str, options: VerifyOptions | None = None) -> Report:
        v = verifier
        if options is not None and options != verifier.options:
            v = copy.copy(verifier)  # shares the pool and the cached reference packs; only the options differ
            v.options = options
        return v.verify(problem, candidate)
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


def agent_deps(provider: Any, options: VerifyOptions, store: Any) -> tuple[Any, Callable[[], None]]:
    """The agent's dependencies with a real verifier (one warm worker), and the function that closes it."""
    from kernelagent.verifier.sandbox.pool import WorkerPool

    verifier = Verifier(options, pool=WorkerPool.for_options(options, size=1))
    return build_deps(provider, verifier, store), verifier.close
