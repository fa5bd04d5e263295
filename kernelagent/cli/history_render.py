"""What `kernelagent history` shows: a table of attempts, one attempt in detail, and a JSONL export.

The CLI calls these and prints the result; they only read the store.
"""

from __future__ import annotations

import json
from typing import IO, Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from kernelagent.memory.db import StoreError
from kernelagent.memory.store import Store

_VERDICT_STYLE = {"accepted": "green", "rejected": "red"}


class AttemptNotFoundError(StoreError, LookupError):
    """No attempt has this id or id prefix."""


def _x(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


def _num(value: float | None, fmt: str = "{:.3f}") -> str:
    return "" if value is None else fmt.format(value)


def history_table(store: Store, problem: str | None = None, limit: int = 50) -> Table:
    """Newest attempts first (optionally of one problem, by name or id prefix), one row each."""
    title = f"attempts of {problem}" if problem else "recent attempts"
    table = Table(title=title, header_style="bold")
    for name in ("attempt", "created", "problem", "run", "turn", "backend", "verdict", "ms",
                 "vs eager", "vs compile", "roofline", "GPU"):
        table.add_column(name, justify="right" if name in ("turn", "ms", "vs eager", "vs compile",
                                                          "roofline") else "left")
    for row in store.history(problem, limit=limit):
        verdict = row["verdict"] if row["verdict"] == "accepted" else row["category"]
        table.add_row(
            row["id"][:8], (row["created"] or "")[:19].replace("T", " "), row["problem"] or "",
            (row["run_id"] or "")[:8], str(row["turn"]), row["backend"] or "",
            Text(verdict, style=_VERDICT_STYLE.get(row["verdict"], "")),
            _num(row["candidate_ms"]), _x(row["speedup_eager"]), _x(row["speedup_compile"]),
            _num(row["roofline_pct"], "{:.0f}%"), row["gpu"] or "",
        )
    return table


def _facts(row: dict[str, Any]) -> Table:
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    metrics = row["metrics"] or {}
    items = [
        ("attempt", row["id"]), ("problem", f"{row['problem']} ({row['problem_id'][:12]})"),
        ("run", row["run_id"] or "-"), ("parent", row["parent_id"] or "-"),
        ("turn / candidate", f"{row['turn']} / {row['candidate_index']}"), ("backend", row["backend"]),
        ("verdict", f"{row['verdict']} ({row['category']})"), ("message", row["message"] or ""),
        ("time", f"{_num(row['candidate_ms'])} ms; eager {_num(row['eager_ms'])} ms; "
                 f"compile {_num(row['compile_ms'])} ms"),
        ("speedup", f"{_x(row['speedup_eager'])} vs eager, {_x(row['speedup_compile'])} vs compile"),
        ("roofline", f"{_num(row['roofline_pct'], '{:.1f}%')} {row['roofline_bound'] or ''}".strip()),
        ("registers / spills", f"{metrics.get('registers', '')} / {metrics.get('spills', '')}"),
        ("GPU", row["gpu"] or ""),
        ("versions", ", ".join(f"{k} {v}" for k, v in (row["versions"] or {}).items() if k != "gpu")),
        ("created", row["created"]),
    ]
    for key, value in items:
        facts.add_row(key, str(value))
    return facts


def _stages(report: dict[str, Any]) -> Table:
    table = Table(title="stages", header_style="bold")
    for name in ("stage", "status", "seconds", "message"):
        table.add_column(name)
    for stage in report.get("stages", []):
        table.add_row(stage["name"], stage["status"], f"{stage.get('seconds', 0.0):.2f}",
                      stage.get("message", ""))
    return table


def attempt_detail(store: Store, attempt_id: str) -> RenderableType:
    """One attempt: its facts, verifier stages, feedback and source. Raises AttemptNotFoundError."""
    row = store.attempt(attempt_id)
    if row is None:
        raise AttemptNotFoundError(f"no attempt with id {attempt_id!r}")
    return Group(
        Panel(_facts(row), title=f"attempt {row['id']}"),
        _stages(row["report"] or {}),
        Panel(Text(row["feedback"] or "(none)"), title="feedback"),
        Panel(Syntax(row["source"] or "", "python", line_numbers=True), title="source"),
    )


def export_jsonl(store: Store, fp: IO[str], problem: str | None = None) -> int:
    """Write each attempt, oldest first, as a JSON line with its problem and run; return the count."""
    where = "where p.name = :p or substr(a.problem_id, 1, length(:p)) = :p" if problem else ""
    rows = store.query(
        "select a.*, p.name as problem, p.op_signature, r.provider, r.model from attempts a "
        f"left join problems p on p.id = a.problem_id left join runs r on r.id = a.run_id {where} "
        "order by a.created, a.rowid", {"p": problem})
    for row in rows:
        fp.write(json.dumps(row, sort_keys=True) + "\n")
    return len(rows)
