"""The ```python blocks of the DSL guides (kernelagent/prompts/*.md) and the check lines they carry.

Convention (stated at the top of each guide): a block fenced ```python is a complete file whose
`# check: <statements>` lines are run after importing it (CuTe: compile-only on CPU; Triton: under
the interpreter), and whose `# gpu-check:` lines run only on a GPU; a block fenced
```python fragment is an excerpt and is not run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

PROMPTS = Path(__file__).resolve().parents[2] / "kernelagent" / "prompts"
GUIDES = {"cute": PROMPTS / "cute_dsl.md", "triton": PROMPTS / "triton.md"}

_FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```\s*$", re.M | re.S)


@dataclass
class Snippet:
    guide: str
    index: int  # position among the guide's python blocks
    line: int  # line of the opening fence in the markdown
    info: str  # "" for a complete file, "fragment" for an excerpt
    source: str

    @property
    def name(self) -> str:
        return f"{self.guide}_snippet_{self.index}"

    def checks(self, tag: str = "check") -> list[str]:
        return re.findall(rf"^# {tag}: (.*)$", self.source, re.M)


def snippets(guide: str) -> list[Snippet]:
    text = GUIDES[guide].read_text()
    return [Snippet(guide, i, text.count("\n", 0, m.start()) + 1, m.group(1).strip(), m.group(2))
            for i, m in enumerate(_FENCE.finditer(text))]


def write_full(guide: str, directory: Path) -> list[Path]:
    """Each complete block of a guide as its own module file; returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in snippets(guide):
        if s.info == "":
            path = directory / f"{s.name}.py"
            path.write_text(s.source)
            paths.append(path)
    return paths
