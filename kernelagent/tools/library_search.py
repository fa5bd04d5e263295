"""Find library kernels for an outside agent: by words (name, summary, ops), or by running both references
on a problem's inputs; and show one entry with its card and sources."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelagent.kernels import LibraryError, get_entry, list_entries
from kernelagent.tools.verify import InputError, existing_file
from kernelagent.verifier.api import Verifier


def _text(entry: Any) -> str:
    card = entry.card
    return " ".join([entry.name, entry.family, str(card.get("summary", "")), " ".join(card.get("signature", []))]
                    ).lower()


def search(query: str | None = None, problem: str | Path | None = None, verifier: Verifier | None = None
           ) -> list[dict[str, Any]]:
    """Entries whose name, summary or ops contain every word of `query`; with `problem`, those whose
    reference computes the same function on the problem's inputs (run in a worker)."""
    from kernelagent.tools.library import entry_summary, match_problem

    entries = list_entries()
    if query:
        words = query.lower().split()
        entries = [e for e in entries if all(w in _text(e) for w in words)]
    if problem is None:
        return [entry_summary(e) for e in entries]
    if verifier is None:
        raise InputError("matching a problem needs a verifier")
    try:
        found = match_problem(existing_file(problem, "problem file"), verifier, entries)
    except LibraryError as e:
        raise InputError(str(e)) from e
    by_name = {e.name: e for e in entries}
    return [{**entry_summary(by_name[m["name"]]), "match": m} for m in found if m.get("match") and m["name"] in by_name]


def show(name: str) -> dict[str, Any]:
    """One entry: summary, card, reference source and each backend's kernel source."""
    from kernelagent.tools.library import entry_summary

    try:
        entry = get_entry(name)
    except LibraryError as e:
        raise InputError(str(e)) from e
    return {**entry_summary(entry), "card": entry.card, "reference": entry.reference_path.read_text(),
            "kernels": {b: p.read_text() for b, p in entry.backends.items()},
            "files": {"reference": str(entry.reference_path), **{b: str(p) for b, p in entry.backends.items()}}}
