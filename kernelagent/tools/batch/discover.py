"""Which files are problems and which are their candidates (the conventions are in the package docstring)."""

from __future__ import annotations

import ast
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kernelagent.problem import problem_name
from kernelagent.tools.batch.options import BatchError

PROBLEM_STEMS = ("op", "reference", "problem")
FOLDER_CANDIDATES = ("kernel*.py", "triton*.py", "cute*.py")


@dataclass(frozen=True)
class BatchProblem:
    path: Path
    candidates: tuple[Path, ...] = ()

    @property
    def name(self) -> str:
        return problem_name(self.path)


def _top_names(path: Path) -> set[str] | None:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return None
    return {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}


def is_problem(path: Path) -> bool:
    """A KernelBench-style problem: defines `Model` and `get_inputs`, and no `ModelNew`."""
    names = _top_names(path)
    return names is not None and {"Model", "get_inputs"} <= names and "ModelNew" not in names


def candidates_of(problem: Path) -> tuple[Path, ...]:
    """The candidate files beside `problem`, by the naming convention in the module docstring."""
    folder, stem = problem.parent, problem.stem
    globs = FOLDER_CANDIDATES if stem in PROBLEM_STEMS else tuple(f"{stem}_{g}" for g in FOLDER_CANDIDATES)
    found = {p for g in globs for p in folder.glob(g) if p.is_file() and p != problem}
    return tuple(sorted(p for p in found if not is_problem(p)))


def _folder(folder: Path) -> list[Path]:
    """Problem files of one folder: its op.py (or reference.py, problem.py) alone, else every problem file."""
    for stem in PROBLEM_STEMS:
        if (folder / f"{stem}.py").is_file():
            return [folder / f"{stem}.py"]
    files = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
    return [p for p in files if is_problem(p)]


def discover(paths: Sequence[Path]) -> list[BatchProblem]:
    """Every problem under `paths` (folders are walked), each with its candidates; sorted, no repeats."""
    found: dict[Path, BatchProblem] = {}
    for path in paths:
        path = Path(path)
        if path.is_file():
            if not is_problem(path):
                raise BatchError(f"{path} is not a problem file (it needs `class Model` and `def get_inputs`)")
            files = [path]
        elif path.is_dir():
            files = [f for d, subdirs, _ in os.walk(path) if not _skip(d, subdirs) for f in _folder(Path(d))]
        else:
            raise BatchError(f"{path} does not exist")
        for f in files:
            found.setdefault(f.resolve(), BatchProblem(f.resolve(), candidates_of(f.resolve())))
    return [found[k] for k in sorted(found)]


def _skip(folder: str, subdirs: list[str]) -> bool:
    subdirs[:] = sorted(d for d in subdirs if not d.startswith((".", "_")) and d != "node_modules")
    return Path(folder).name.startswith(".")
