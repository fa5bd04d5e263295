"""Loading the prompt templates in `kernelagent/prompts/`: markdown with `${name}` placeholders.

A template file holds one or more sections, each opened by a line `<!-- @name -->`; text before the
first marker is the section `main`. Write `$$` for a literal dollar sign.
"""

from __future__ import annotations

import functools
import string
from importlib import resources

from kernelagent.agent.providers.base import Block

PACKAGE, FOLDER = "kernelagent", "prompts"
GUIDES = {"triton": "triton.md", "cute": "cute_dsl.md"}
BACKEND_NAMES = {"triton": "Triton", "cute": "CuTe DSL"}


def _read(filename: str) -> str | None:
    path = resources.files(PACKAGE).joinpath(FOLDER, filename)
    return path.read_text(encoding="utf-8") if path.is_file() else None


@functools.cache
def sections(filename: str) -> dict[str, str]:
    """The sections of a template file, keyed by name."""
    text = _read(filename)
    if text is None:
        raise FileNotFoundError(f"prompt template {filename} is missing from {PACKAGE}/{FOLDER}")
    out, name, lines = {}, "main", []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("<!-- @") and s.endswith("-->"):
            out[name] = "\n".join(lines).strip("\n")
            name, lines = s[6:-3].strip(), []
        else:
            lines.append(line)
    out[name] = "\n".join(lines).strip("\n")
    return out


def render(filename: str, section: str = "main", **values: object) -> str:
    """Fill one section of a template; a missing value is a bug and raises KeyError."""
    return string.Template(sections(filename)[section]).substitute({k: str(v) for k, v in values.items()})


def guide(backend: str) -> str | None:
    """The DSL guide for `backend` when it is installed, else None."""
    name = GUIDES.get(backend)
    return _read(name) if name else None


def system_blocks(backend: str) -> list[Block]:
    """The system prompt and the backend's guide, both marked for caching."""
    blocks = [Block(render("system.md", backend=BACKEND_NAMES.get(backend, backend)), cache=True)]
    text = guide(backend)
    if text:
        blocks.append(Block(text, cache=True))
    return blocks
