"""The curated kernel library: one folder per op family, each with reference.py (problem format),
one file per backend (triton.py, cute.py) defining ModelNew, and card.json / card.md.

This module only reads the folders (no torch, no triton): the CLI can list the shelf cheaply, and
the kernels themselves are loaded by the verifier like any candidate file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LIBRARY_ROOT = Path(__file__).resolve().parent
BACKEND_FILES = {"triton": "triton.py", "cute": "cute.py"}


class LibraryError(LookupError):
    """An entry that is missing or whose card cannot be read."""


@dataclass(frozen=True)
class LibraryEntry:
    name: str
    family: str
    path: Path  # the family folder
    reference_path: Path
    backends: dict[str, Path] = field(default_factory=dict)  # backend -> kernel file
    card: dict[str, Any] = field(default_factory=dict)


def _read_card(folder: Path) -> dict[str, Any]:
    path = folder / "card.json"
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise LibraryError(f"{path}: not valid JSON ({e.msg}, line {e.lineno})") from e
    if not isinstance(card, dict):
        raise LibraryError(f"{path}: expected a JSON object, got {type(card).__name__}")
    return card


def _entry(folder: Path) -> LibraryEntry:
    card = _read_card(folder)
    backends = {b: folder / f for b, f in BACKEND_FILES.items() if (folder / f).is_file()}
    return LibraryEntry(name=str(card.get("name", folder.name)), family=str(card.get("family", folder.name)),
                        path=folder, reference_path=folder / "reference.py", backends=backends, card=card)


def list_entries(root: Path | None = None) -> list[LibraryEntry]:
    """Every family folder that has a card.json and a reference.py, sorted by name."""
    base = root or LIBRARY_ROOT
    folders = [p for p in sorted(base.iterdir()) if p.is_dir() and (p / "card.json").is_file()
               and (p / "reference.py").is_file()]
    return sorted((_entry(p) for p in folders), key=lambda e: e.name)


def get_entry(name: str, root: Path | None = None) -> LibraryEntry:
    """The entry called `name` (its card's name, or its folder's); LibraryError if there is none."""
    entries = list_entries(root)
    for entry in entries:
        if name in (entry.name, entry.path.name):
            return entry
    known = ", ".join(e.name for e in entries) or "none"
    raise LibraryError(f"no library entry named {name!r} (known: {known})")
