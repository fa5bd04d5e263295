"""Library tools: list and show entries, verify them, find entries computing the same function as a
problem, and add a verified kernel to the shelf. Used by the CLI, the agent and outside agents.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from kernelagent.kernels import LIBRARY_ROOT, LibraryEntry, LibraryError, get_entry, list_entries
from kernelagent.problem import inspect_problem
from kernelagent.verifier.api import Verifier
from kernelagent.verifier.report import Report


def normalize_ops(ops: list[str]) -> set[str]:
    """'aten::_softmax' and 'aten._softmax.default' both become 'aten._softmax'."""
    out = set()
    for op in ops:
        op = op.replace("::", ".")
        parts = op.split(".")
        out.add(".".join(parts[:2]))
    return out


def entry_summary(e: LibraryEntry) -> dict[str, Any]:
    return {"name": e.name, "family": e.family, "backends": sorted(e.backends), "summary": e.card.get("summary", ""),
            "dtypes": e.card.get("dtypes", []), "verified": e.card.get("verified", []), "path": str(e.path)}


def match_problem(problem: str | Path, verifier: Verifier, entries: list[LibraryEntry] | None = None
                  ) -> list[dict[str, Any]]:
    """Library entries whose reference computes the same function as `problem` (run in a worker)."""
    entries = entries if entries is not None else list_entries()
    if not entries:
        return []
    worker = verifier.pool.acquire(verifier.device)
    req = {"role": "match", "problem": str(Path(problem).resolve()), "device": verifier.device,
           "seed": verifier.options.secret, "cap": verifier.options.cpu_max_elements,
           "entries": [{"name": e.name, "reference": str(e.reference_path)} for e in entries]}
    res = worker.run(req, verifier.options.timeout, verifier.options.memory_limit_mb)
    worker.discard()
    if res.status != "ok" or "error" in res.result:
        err = res.result.get("error", {}).get("message") or f"matching worker {res.status}: {res.died_how}"
        raise LibraryError(f"could not compare {problem} with the library: {err}")
    return res.result["match"]["results"]


def verify_entry(entry: LibraryEntry, backend: str, verifier: Verifier, problem: str | Path | None = None) -> Report:
    if backend not in entry.backends:
        raise LibraryError(f"{entry.name} has no {backend} kernel (it has: {', '.join(sorted(entry.backends))})")
    return verifier.verify(problem or entry.reference_path, entry.backends[backend])


def add_entry(kernel: str | Path, ref: str | Path, name: str, verifier: Verifier, summary: str = "",
              root: Path | None = None) -> tuple[Report, Path | None]:
    """Verify `kernel` against `ref`; if accepted, copy both into a new library folder with a card."""
    if not re.fullmatch(r"[a-z][a-z0-9_]{1,40}", name):
        raise LibraryError("a library name is lowercase letters, digits and underscores, 2-41 characters")
    base = root or LIBRARY_ROOT
    folder = base / name
    if folder.exists():
        raise LibraryError(f"library entry {name!r} already exists at {folder}")
    report = verifier.verify(ref, kernel)
    if not report.accepted:
        return report, None
    spec = inspect_problem(ref)
    backend = report.candidate.get("backend") or "triton"
    folder.mkdir(parents=True)
    shutil.copyfile(ref, folder / "reference.py")
    shutil.copyfile(kernel, folder / f"{'cute' if backend == 'cute' else 'triton'}.py")
    card = {"name": name, "family": name, "summary": summary or f"added from {Path(kernel).name}",
            "backends": [backend], "signature": [], "dtypes": [], "source_problem": spec.name,
            "verified": [_verified_row(report)], "notes": "added with `kernelagent library add`"}
    (folder / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    (folder / "card.md").write_text(f"# {name}\n\n{card['summary']}\n")
    return report, folder


def _verified_row(report: Report) -> dict[str, Any]:
    env = report.environment
    keep = ("candidate_ms", "eager_ms", "compile_ms", "speedup_eager", "speedup_compile", "roofline_pct")
    return {"date": report.created[:10], "device": env.get("gpu") or env.get("device"), "torch": env.get("torch"),
            "triton": env.get("triton"), "trials": report.metrics.get("trials"),
            **{k: report.metrics.get(k) for k in keep if report.metrics.get(k) is not None}}


def examples_for(op_signature: list[str], backend: str, limit: int = 2) -> list[dict[str, Any]]:
    """Library kernels whose card signature overlaps the problem's ops, as prompt examples."""
    want = normalize_ops(op_signature)
    scored = []
    for e in list_entries():
        if backend not in e.backends:
            continue
        have = normalize_ops(e.card.get("signature", []))
        overlap = len(want & have) / len(want | have) if want | have else 0.0
        if overlap > 0:
            scored.append((overlap, e))
    scored.sort(key=lambda t: -t[0])
    return [{"problem": f"library:{e.name}", "backend": backend, "speedup": None, "overlap": ov,
             "source": e.backends[backend].read_text()} for ov, e in scored[:limit]]


__all__ = ["LibraryError", "add_entry", "entry_summary", "examples_for", "get_entry", "list_entries",
           "match_problem", "verify_entry"]
