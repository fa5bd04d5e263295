"""The kernel library: one folder per op family, each with reference.py (problem format), one file
per backend (triton.py, cute.py) defining ModelNew, and card.json / card.md.

Two shelves are searched: the one shipped in this package (read-only: never written to) and the
user's own, `$KERNELAGENT_HOME/library/<name>/`, where `kernelagent library add` writes. This module
only reads the folders (no torch, no triton): the CLI can list the shelves cheaply, and the kernels
themselves are loaded by the verifier like any candidate file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LIBRARY_ROOT = Path(__file__).resolve().parent  # the shipped shelf
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
    origin: str = "shipped"  # shipped | user


def user_root() -> Path:
    """The user's shelf: $KERNELAGENT_HOME/library (default ~/.kernelagent/library); may not exist yet."""
    home = os.environ.get("KERNELAGENT_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".kernelagent") / "library"


def library_roots() -> list[tuple[Path, str]]:
    """(folder, origin) of every shelf, searched in this order: shipped first, then the user's."""
    return [(LIBRARY_ROOT, "shipped"), (user_root(), "user")]


def _read_card(folder: Path) -> dict[str, Any]:
    path = folder / "card.json"
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise LibraryError(f"{path}: not valid JSON ({e.msg}, line {e.lineno})") from e
    if not isinstance(card, dict):
        raise LibraryError(f"{path}: expected a JSON object, got {type(card).__name__}")
    return card


def _entry(folder: Path, origin: str) -> LibraryEntry:
    card = _read_card(folder)
    backends = {b: folder / f for b, f in BACKEND_FILES.items() if (folder / f).is_file()}
    return LibraryEntry(name=str(card.get("name", folder.name)), family=str(card.get("family", folder.name)),
                        path=folder, reference_path=folder / "reference.py", backends=backends, card=card,
                        origin=origin)


def _scan(base: Path, origin: str) -> list[LibraryEntry]:
    if not base.is_dir():
        return []
    folders = [p for p in sorted(base.iterdir()) if p.is_dir() and (p / "card.json").is_file()
               and (p / "reference.py").is_file()]
    return [_entry(p, origin) for p in folders]


def list_entries(root: Path | None = None) -> list[LibraryEntry]:
    """Every family folder with a card.json and a reference.py on both shelves (or under `root` only),
    sorted by name; a shipped entry comes before a user entry of the same name."""
    roots = [(root, "user" if root != LIBRARY_ROOT else "shipped")] if root else library_roots()
    order = {origin: i for i, (_, origin) in enumerate(roots)}
    entries = [e for base, origin in roots for e in _scan(base, origin)]
    return sorted(entries, key=lambda e: (e.name, order[e.origin]))


def get_entry(name: str, root: Path | None = None) -> LibraryEntry:
    """The entry called `name` (its card's name, or its folder's); LibraryError if there is none."""
    entries = list_entries(root)
    for entry in entries:
        if name in (entry.name, entry.path.name):
            return entry
    known = ", ".join(e.name for e in entries) or "none"
    raise LibraryError(f"no library entry named {name!r} (known: {known})")
