"""The `# key: value` header lines of a corpus file, read the same way by every corpus test."""

from __future__ import annotations

import re


def header(text: str, key: str, default: str | None = None) -> str:
    """The value of `# key:` in `text`; `default` when absent, and a failure when there is no default."""
    match = re.search(rf"^# {key}: (.+)$", text, re.MULTILINE)
    if match is None:
        if default is None:
            raise AssertionError(f"missing '# {key}:' line")
        return default
    return match.group(1).strip()
