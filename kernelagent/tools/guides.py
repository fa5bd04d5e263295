"""The texts an outside coding agent reads: the DSL guides our own agent is given, and the skill file."""

from __future__ import annotations

from pathlib import Path

from kernelagent.tools.verify import InputError

_PKG = Path(__file__).resolve().parents[1]
GUIDES = {"triton": _PKG / "prompts" / "triton.md", "cute": _PKG / "prompts" / "cute_dsl.md",
          "skill": _PKG / "tools" / "skill.md"}


def guide(name: str) -> str:
    """The guide called `name` (triton, cute or skill) as markdown."""
    path = GUIDES.get(name)
    if path is None:
        raise InputError(f"no guide {name!r} (known: {', '.join(GUIDES)})")
    return path.read_text(encoding="utf-8")
