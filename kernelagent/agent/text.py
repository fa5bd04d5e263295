"""Plain text for the model and for reports: no terminal escape codes, each fact once, no local paths.

Compiler and framework errors arrive coloured and sometimes twice (a CuTe DSL error came as a plain copy
followed by a coloured one); a prompt or report gets `plain(text)` before it is sent or written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# CSI sequences (colours, cursor moves), OSC sequences (titles, links) and two-byte escapes.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
MIN_REPEAT = 3          # a run of at least this many lines that repeats an earlier run is dropped,
MIN_REPEAT_CHARS = 60   # and so is a shorter run with at least this many characters (an error message twice)


def strip_ansi(text: str) -> str:
    """`text` without escape sequences or stray control characters (newlines and tabs stay)."""
    return _CONTROLS.sub("", _ESCAPES.sub("", text.replace("\r\n", "\n")))


def _repeat_length(lines: list[str], start: int, earlier: int) -> int:
    """How many lines from `start` repeat the lines from `earlier` (stopping before `start`)."""
    n = 0
    while start + n < len(lines) and earlier + n < start and lines[start + n] == lines[earlier + n]:
        n += 1
    return n


def _worth_dropping(lines: list[str], start: int, n: int) -> bool:
    return n >= MIN_REPEAT or (n > 0 and sum(len(x.strip()) for x in lines[start:start + n]) >= MIN_REPEAT_CHARS)


def drop_repeats(text: str) -> str:
    """`text` without runs of lines that repeat an earlier run (MIN_REPEAT lines or MIN_REPEAT_CHARS long)."""
    lines = [line.rstrip() for line in text.split("\n")]
    first: dict[str, list[int]] = {}
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip():
            best = max((_repeat_length(lines, i, j) for j in first.get(line, [])), default=0)
            if _worth_dropping(lines, i, best):
                i += best
                continue
            first.setdefault(line, []).append(i)
        out.append(line)
        i += 1
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip("\n")


def scrub_paths(text: str, labels: Mapping[str, str]) -> str:
    """Each local folder in `labels` replaced by its label (longest first), so no local path leaves here.

    An empty label removes the folder (`/run/dir/k.py` becomes `k.py`); a path only matches whole names.
    """
    for path in sorted((p.rstrip("/") for p in labels if p and len(p.rstrip("/")) > 1), key=len, reverse=True):
        label = labels.get(path, labels.get(path + "/", ""))
        pattern = re.compile(re.escape(path) + r"(/|(?![\w.-]))")
        text = pattern.sub(lambda m, lab=label: (lab + m.group(1)) if lab else ("" if m.group(1) else "."), text)
    return text


def plain(text: str, labels: Mapping[str, str] | None = None) -> str:
    """Text fit for a prompt or a report: no escape codes, no repeated runs of lines, no local paths."""
    out = drop_repeats(strip_ansi(text or ""))
    return scrub_paths(out, labels) if labels else out
