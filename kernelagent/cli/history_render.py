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

_VERDICT_STYLE = {"accepted": "green", "unverified": "yellow", "rejected": "red"}


class AttemptNotFoundError(StoreError, LookupError):
    """No attempt has this id or id prefix."""


def _x(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


def _num(value: float | None, fmt: str = "{:.3f}") -> str:
    return "" if value is None else fmt.format(value)


# (header, justify, minimum console width to show it): narrower terminals drop the later columns
# instead of squeezing every header to "att…"
_COLUMNS = [("attempt", "left", 0), ("problem", "left", 0), ("turn", "right", 0), ("verdict", "left", 0),
            ("ms", "right", 0), ("vs eager", "right", 0), ("created", "left", 90), ("vs compile", "right", 100),
            ("backend", "left", 110), ("run", "left", 120), ("roofline", "right", 130), ("GPU", "left", 140)]


def history_table(store: Store, problem: str | None = None, limit: int = 50, width: int = 200) -> Table:
    """Newest attempts first (optionally of one problem, by name or id prefix), one row each; the columns
    that fit in `width` characters, headers never cut."""
    title = f"attempts of {problem}" if problem else "recent attempts"
    cols = [c for c in _COLUMNS if width >= c[2]]
    table = Table(title=title, header_style="bold", pad_edge=False)
    for name, justify, _ in cols:
        table.add_column(name, justify=justify, min_width=len(name), no_wrap=name != "problem",
                         overflow="ellipsis")
    for row in store.history(problem, limit=limit):
        verdict = row["verdict"] if row["verdict"] == "accepted" else row["category"]
        cells = {
            "attempt": row["id"][:8], "created": (row["created"] or "")[:16].replace("T", " "),
            "problem": row["problem"] or "", "run": (row["run_id"] or "")[:8], "turn": str(row["turn"]),
            "backend": row["backend"] or "", "verdict": Text(verdict, style=_VERDICT_STYLE.get(row["verdict"], "")),
            "ms": _num(row["candidate_ms"]), "vs eager": _x(row["speedup_eager"]),
            "vs compile": _x(row["speedup_compile"]), "roofline": _num(row["roofline_pct"], "{:.0f}%"),
            "GPU": row["gpu"] or "",
        }
        table.add_row(*(cells[name] for name, _, _ in cols))
    return table


def runs_table(rows: list[dict[str, Any]], width: int = 200) -> Table:
    """One row per run (optimize or verify), newest first."""
    cols = [("run", 0), ("kind", 0), ("problem", 0), ("status", 0), ("attempts", 0), ("best", 0),
            ("started", 90), ("model", 110), ("cost", 120), ("batch", 130)]
    table = Table(title="runs", header_style="bold", pad_edge=False)
    for name, need in cols:
        if width >= need:
            table.add_column(name, min_width=len(name), no_wrap=name != "problem",
                             justify="right" if name in ("attempts", "best", "cost") else "left")
    for r in rows:
        cells = {"run": r["id"][:8], "kind": r.get("kind") or "", "problem": r.get("problem") or "",
                 "status": r.get("status") or "", "attempts": f"{r.get('accepted') or 0}/{r.get('attempts') or 0}",
                 "best": _x(r.get("best_speedup")) or ("-" if not r.get("accepted") else "not timed"),
                 "started": (r.get("started") or "")[:16].replace("T", " "), "model": r.get("model") or "",
                 "cost": f"${r.get('cost_usd') or 0:.2f}", "batch": (r.get("batch_id") or "")[:8]}
        table.add_row(*(cells[name] for name, need in cols if width >= need))
    return table


def search_table(rows: list[dict[str, Any]], text: str) -> Table:
    """Search hits: what matched (attempt or LLM exchange), where, and the matching words in context."""
    table = Table(title=f"matches for {text!r}", header_style="bold", pad_edge=False)
    for name in ("id", "kind", "problem", "verdict", "snippet"):
        table.add_column(name, min_width=len(name), no_wrap=name != "snippet", overflow="fold")
    for r in rows:
        table.add_row(r["id"][:8], r["kind"], r.get("problem") or "", r.get("category") or r.get("verdict") or "",
                      Text(" ".join((r.get("snippet") or "").split())))
    return table


def exchanges_table(rows: list[dict[str, Any]]) -> Table:
    """LLM calls, newest first: run, turn, tokens, cost and the start of the reply."""
    table = Table(title="LLM exchanges", header_style="bold", pad_edge=False)
    for name in ("id", "run", "turn", "model", "tokens", "cost", "reply"):
        table.add_column(name, min_width=len(name), no_wrap=name != "reply", overflow="fold")
    for r in rows:
        reply = r.get("error") or " ".join((r.get("response") or "").split())[:120]
        table.add_row(r["id"][:8], (r.get("run_id") or "")[:8], f"{r['turn']}.{r['candidate_index']}",
                      r.get("model") or "", f"{r.get('input_tokens') or 0}+{r.get('output_tokens') or 0}",
                      f"${r.get('cost_usd') or 0:.3f}", reply)
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


EXPORTS = {
    "attempts": ("select a.*, p.name as problem, p.op_signature, r.provider, r.model from attempts a "
                 "left join problems p on p.id = a.problem_id left join runs r on r.id = a.run_id {where} "
                 "order by a.created, a.rowid", "where p.name = :p or substr(a.problem_id, 1, length(:p)) = :p"),
    "runs": ("select r.*, p.name as problem from runs r left join problems p on p.id = r.problem_id {where} "
             "order by r.started, r.rowid", "where p.name = :p or substr(r.problem_id, 1, length(:p)) = :p"),
    "exchanges": ("select e.*, p.name as problem from exchanges e left join runs r on r.id = e.run_id "
                  "left join problems p on p.id = r.problem_id {where} order by e.created, e.rowid",
                  "where p.name = :p or substr(r.problem_id, 1, length(:p)) = :p"),
    "batches": ("select i.*, b.mode from batch_items i join batches b on b.id = i.batch_id {where} "
                "order by i.created", "where i.problem = :p or substr(i.batch_id, 1, length(:p)) = :p"),
}


def export_jsonl(store: Store, fp: IO[str], problem: str | None = None, table: str = "attempts") -> int:
    """Write each row of `table` (attempts, runs, exchanges, batches), oldest first, as a JSON line; return
    the count. `problem` filters by problem name or id prefix (for batches: problem name or batch id)."""
    sql, where = EXPORTS[table]
    rows = store.query(sql.format(where=where if problem else ""), {"p": problem})
    for row in rows:
        fp.write(json.dumps(row, sort_keys=True, default=str) + "\n")
    return len(rows)
