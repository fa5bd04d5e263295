"""Finding the candidate file in an LLM reply: fenced blocks parsed line by line, never a greedy regex.

A block counts when its fence is ``` or ~~~ (three or more) labelled python/py/python3 or unlabelled,
and it defines `class ModelNew` at top level. Of several such blocks the one marked `final` wins
(```python final, or a first line `# final`), else the last one; either way the feedback says so.
An unterminated block (a reply cut off at max_tokens) is not a candidate.
"""

from __future__ import annotations

from dataclasses import dataclass

PYTHON_LABELS = {"", "python", "py", "python3"}


@dataclass
class Fence:
    label: str
    lines: list[str]
    closed: bool
    info: str = ""  # the words after the language on the opening line


@dataclass
class Extraction:
    """The candidate chosen from a reply and how: `blocks` counts the complete blocks defining ModelNew."""

    source: str | None
    blocks: int = 0
    chosen: int = 0            # 1-based position of the chosen block among those `blocks`
    marked: bool = False       # chosen because it was marked final
    truncated: bool = False    # the reply ends inside an open fence


def _opening(line: str) -> tuple[str, int, str, str] | None:
    """(fence char, fence length, label, info) when `line` opens a fence."""
    s = line.strip()
    for ch in "`~":
        n = len(s) - len(s.lstrip(ch))
        if n >= 3:
            words = s[n:].strip().split(maxsplit=1)
            if ch == "`" and "`" in s[n:]:
                return None  # inline code such as ```x``` on one line
            return ch, n, (words[0].lower() if words else ""), (words[1].lower() if len(words) > 1 else "")
    return None


def _closes(line: str, ch: str, n: int) -> bool:
    s = line.strip()
    return len(s) >= n and set(s) == {ch}


def fences(text: str) -> list[Fence]:
    """Every fenced block of `text`, in order, with its label and whether it was closed."""
    out: list[Fence] = []
    current: tuple[str, int, Fence] | None = None
    for line in text.splitlines():
        if current is None:
            opened = _opening(line)
            if opened:
                ch, n, label, info = opened
                current = (ch, n, Fence(label, [], False, info))
        elif _closes(line, current[0], current[1]):
            current[2].closed = True
            out.append(current[2])
            current = None
        else:
            current[2].lines.append(line)
    if current is not None:
        out.append(current[2])
    return out


def defines_model_new(code: str) -> bool:
    """True when a line of `code` starts a top-level `class ModelNew` (works on code that does not parse)."""
    for line in code.splitlines():
        rest = line[len("class ModelNew"):] if line.startswith("class ModelNew") else ""
        if rest[:1] in ("(", ":", " "):
            return True
    return False


def _marked(f: Fence) -> bool:
    first = next((x.strip().lower() for x in f.lines if x.strip()), "")
    return "final" in f.info.split() or first in ("# final", "#final")


def extract(text: str) -> Extraction:
    """The candidate of a reply with how it was chosen (see the module docstring)."""
    found = fences(text)
    truncated = bool(found) and not found[-1].closed
    blocks = [f for f in found if f.closed and f.label in PYTHON_LABELS and defines_model_new("\n".join(f.lines))]
    if not blocks:
        return Extraction(None, truncated=truncated)
    marked = [i for i, f in enumerate(blocks) if _marked(f)]
    pick = marked[-1] if marked else len(blocks) - 1
    source = "\n".join(blocks[pick].lines).strip("\n") + "\n"
    return Extraction(source, blocks=len(blocks), chosen=pick + 1, marked=bool(marked), truncated=truncated)


def extract_candidate(text: str) -> str | None:
    """The whole candidate file from a reply, or None when no closed python block defines ModelNew."""
    return extract(text).source


def was_truncated(text: str) -> bool:
    """True when the reply ends inside an open fence (cut off at the token limit)."""
    found = fences(text)
    return bool(found) and not found[-1].closed
