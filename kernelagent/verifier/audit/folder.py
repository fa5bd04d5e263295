"""`audit_folder`: audit every problem under a folder (KernelBench's level folders as they are), several
at once, resumably.

Results live in one JSON file (`--out`, by default `$KERNELAGENT_HOME/audits/<folder>-<hash>.json`),
rewritten after every problem: a run that is stopped keeps what it finished, and the next run with the
same file and settings audits only what is missing or changed (by content hash). Outcomes that depend on
the moment (oom, timeout, crashed, internal) are retried on the next run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from kernelagent.verifier.audit.problem import audit_problem
from kernelagent.verifier.audit.runner import Budget, kill_all
from kernelagent.verifier.audit.settings import AuditSettings
from kernelagent.verifier.estimate import read_machine

RESULTS_VERSION = 1
KEPT = ("ok", "error", "refused")      # outcomes a resumed run keeps
Progress = Callable[[str, dict[str, Any]], None]


def discover(root: Path) -> list[Path]:
    """Problem files under `root`: .py files (not hidden, not __init__) that define Model and get_inputs,
    in natural order (level1/2 before level1/10)."""
    out = []
    for p in root.rglob("*.py"):
        rel = p.relative_to(root).parts
        if p.name == "__init__.py" or any(part.startswith(".") or part == "__pycache__" for part in rel):
            continue
        try:
            text = p.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "Model" in text and "def get_inputs" in text:
            out.append(p)
    return sorted(out, key=lambda p: _natural(p.relative_to(root)))


def _natural(rel: Path) -> list[Any]:
    return [[int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", part)] for part in rel.parts]


def default_out(root: Path, settings: AuditSettings) -> Path:
    home = Path(os.environ.get("KERNELAGENT_HOME") or Path.home() / ".kernelagent")
    tag = hashlib.sha256(f"{root.resolve()}:{settings.key()}".encode()).hexdigest()[:8]
    return home / "audits" / f"{root.resolve().name}-{tag}.json"


class Results:
    """The results file: what earlier runs found, and each new result written as soon as it is known."""

    def __init__(self, path: Path, root: Path, settings: AuditSettings, fresh: bool):
        self.path, self.root, self.settings = path, root, settings
        self.problems: dict[str, dict[str, Any]] = {} if fresh else self._load()
        self._lock = threading.Lock()

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            doc = json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError):
            return {}
        return doc.get("problems", {}) if doc.get("version") == RESULTS_VERSION else {}

    def reusable(self, rel: str, sha: str) -> dict[str, Any] | None:
        prior = self.problems.get(rel)
        ok = prior and prior.get("file_sha256") == sha and prior.get("key") == self.settings.key() \
            and prior.get("status") in KEPT
        return prior if ok else None

    def put(self, rel: str, result: dict[str, Any]) -> None:
        with self._lock:
            self.problems[rel] = {**result, "key": self.settings.key()}
            self.save()

    def document(self) -> dict[str, Any]:
        return {"version": RESULTS_VERSION, "root": str(self.root), "settings": self.settings.to_dict(),
                "updated": time.strftime("%Y-%m-%dT%H:%M:%S"), "summary": summarise(self.problems),
                "problems": self.problems}

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.document(), indent=1, default=str))
        tmp.replace(self.path)


def summarise(problems: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Counts by status, the degenerate problems with what passes, and the ones that could not be audited."""
    counts: dict[str, int] = {}
    for r in problems.values():
        counts[r.get("status", "?")] = counts.get(r.get("status", "?"), 0) + 1
    flagged = [{"problem": rel, "trivial_answers_that_pass": r.get("trivial_answers_that_pass", []),
                "variation": r.get("variation"), "reasons": r.get("reasons", [])}
               for rel, r in problems.items() if r.get("degenerate")]
    failed = [{"problem": rel, "status": r.get("status"), "error": r.get("error", "")}
              for rel, r in problems.items() if r.get("status") != "ok"]
    noted = [{"problem": rel, "notes": [n for n in r.get("notes", []) if "edge case" in n]}
             for rel, r in problems.items() if any("edge case" in n for n in r.get("notes", []))]
    killed = sum(1 for r in problems.values() if r.get("status") == "oom")
    return {"problems": len(problems), "by_status": counts, "degenerate": len(flagged), "flagged": flagged,
            "not_audited": failed, "edge_case_notes": noted, "killed_for_memory": killed}


def audit_folder(root: Path, settings: AuditSettings, jobs: int = 1, out: Path | None = None, fresh: bool = False,
                 progress: Progress | None = None, select: Callable[[str], bool] | None = None) -> dict[str, Any]:
    """Audit every problem under `root` (those whose relative path `select` accepts) with `jobs` children at
    once; the results document."""
    say = progress or (lambda _e, _i: None)
    problems = [p for p in discover(root) if select is None or select(str(p.relative_to(root)))]
    if not problems:
        raise ValueError(f"no problem files (defining Model and get_inputs) under {root}")
    results = Results(out or default_out(root, settings), root, settings, fresh)
    todo = []
    for p in problems:
        rel, sha = str(p.relative_to(root)), hashlib.sha256(p.read_bytes()).hexdigest()
        if results.reusable(rel, sha) is None:
            todo.append((rel, p, sha))
    say("start", {"total": len(problems), "todo": len(todo), "out": str(results.path)})
    budget = Budget(read_machine(settings.device))
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(_audit, p, settings, budget, say, rel): (rel, sha) for rel, p, sha in todo}
        try:
            for future in as_completed(futures):
                rel, sha = futures[future]
                result = future.result()
                result.update(problem=rel, file_sha256=sha)
                results.put(rel, result)
                say("done", {"problem": rel, "result": result})
        except BaseException:  # Ctrl-C: stop the children and the queue; what finished is in the file
            for f in futures:
                f.cancel()
            kill_all()
            raise
    results.save()
    return results.document()


def _audit(path: Path, settings: AuditSettings, budget: Budget, say: Progress, rel: str) -> dict[str, Any]:
    say("begin", {"problem": rel})
    try:
        return audit_problem(path, settings=settings, budget=budget)
    except Exception as e:  # noqa: BLE001 - one problem's failure (ours) is recorded; the batch goes on
        return {"problem": str(path), "status": "internal", "error": f"{type(e).__name__}: {e}",
                "degenerate": False}
