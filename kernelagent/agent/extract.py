"""Finding the candidate file in an LLM reply: fenced blocks parsed line by line, never a greedy regex.

A block counts when its fence is ``` or ~~~ (three or more) labelled python/py/python3 or unlabelled,
and it defines `class ModelNew` at top level. Of several such blocks the last one wins (models tend to
end with their final version). An unterminated block (a reply cut off at max_tokens) is not a candidate.
"""

from __future__ import annotations

from dataclasses import dataclass

PYTHON_LABELS = {"", "python", "py", "python3"}


@dataclass
class Fence:
    label: str
    lines: list[str]
    closed: bool


def _opening(line: str) -> tuple[str, int, str] | None:
    """(fence char, fence length, label) when `line` opens a fence."""
    s = line.strip()
    for ch in "`~":
        n = len(s) - len(s.lstrip(ch))
        if n >= 3:
            label = s[n:].strip().split(maxsplit=1)
            if ch == "`" and "`" in s[n:]:
                return None  # inline code such as ```x``` on one line
            return ch, n, (label[0].lower() if label else "")
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
                ch, n, label = opened
                current = (ch, n, Fence(label, [], False))
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


def extract_candidate(text: str) -> str | None:
    """The whole candidate file from a reply, or None when no closed python block defines ModelNew."""
    blocks = [f for f in fences(text) if f.closed and f.label in PYTHON_LABELS]
    code = ["\n".join(f.lines) for f in blocks]
    with_model = [c for c in code if defines_model_new(c)]
    return with_model[-1].strip("\n") + "\n" if with_model else None


def was_truncated(text: str) -> bool:
    """True when the reply ends inside an open fence (cut off at the token limit)."""
    found = fences(text)
    return bool(found) and not found[-1].closed
