"""The memory store: problems, runs, attempts, baselines and ceilings in one SQLite file.

Usage:
    store = open_store()                      # $KERNELAGENT_HOME/kernelagent.db, migrated
    pid = store.upsert_problem(name="softmax", source=src, op_signature=["aten._softmax"])
    rid = store.start_run(problem_id=pid, provider="anthropic", model="m", backend="triton", budget={})
    aid = store.record_attempt(run_id=rid, problem_id=pid, source=kernel, report=report)

Every write is its own committed transaction, so a killed run keeps every attempt recorded so far.
"""

from __future__ import annotations

import ast
import datetime as _dt
import hashlib
import json
import os
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import sqlite_utils

from kernelagent.memory.db import StoreError, open_db, transact
from kernelagent.memory.migrations import migrate
from kernelagent.verifier.report import Report

T = TypeVar("T")
DB_NAME = "kernelagent.db"
JSON_COLUMNS = ("op_signature", "budget", "config", "timings", "metrics", "versions", "report",
                "details", "ceilings")
RUN_FIELDS = {"status", "tokens_in", "tokens_out", "cost_usd", "best_attempt_id", "finished", "budget",
              "config", "model", "provider", "kind", "batch_id", "problem_path"}
ID_TABLES = ("runs", "attempts", "batches", "exchanges")
# Columns of `history()` rows: everything but the bulky source, feedback and report.
HISTORY_COLUMNS = ("a.id, a.run_id, a.problem_id, p.name as problem, a.parent_id, a.turn, a.candidate_index, "
                   "a.backend, a.verdict, a.category, a.message, a.candidate_ms, a.eager_ms, a.compile_ms, "
                   "a.speedup_eager, a.speedup_compile, a.roofline_pct, a.roofline_bound, a.gpu, "
                   "a.tokens, a.cost_usd, a.created, r.provider, r.model")


_RUNS_SQL = """
select r.*, p.name as problem, count(a.id) as attempts,
       coalesce(sum(a.verdict = 'accepted'), 0) as accepted,
       max(case when a.verdict = 'accepted' then a.speedup_eager end) as best_speedup
from runs r left join problems p on p.id = r.problem_id left join attempts a on a.run_id = r.id
where (:kind is null or r.kind = :kind) and (:batch is null or r.batch_id = :batch)
  and (:p is null or p.name = :p or substr(r.problem_id, 1, length(:p)) = :p)
group by r.id order by r.started desc, r.rowid desc limit :n
"""


class AmbiguousIdError(StoreError, LookupError):
    """An id prefix matched more than one row."""


def default_home() -> Path:
    """The kernelagent home folder: $KERNELAGENT_HOME, or ~/.kernelagent."""
    env = os.environ.get("KERNELAGENT_HOME")
    return Path(env).expanduser() if env else Path.home() / ".kernelagent"


def open_store(home: Path | None = None) -> Store:
    """Open the store in `home` (default `default_home()`), creating and migrating the database."""
    home = Path(home) if home is not None else default_home()
    db = open_db(home / DB_NAME)
    migrate(db)
    return Store(db)


def now_iso() -> str:
    """UTC timestamp with microseconds, so rows written in one second still sort in order."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds")


def source_sha256(source: str) -> str:
    """The hash `find_attempt_by_source` looks up: sha256 of the source text as UTF-8."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def normalise_source(source: str) -> str:
    """Source with comments and formatting removed (via the AST), so cosmetic edits keep one identity."""
    try:
        return ast.unparse(ast.parse(source))
    except SyntaxError:
        lines = source.replace("\r\n", "\n").split("\n")
        return "\n".join(line.rstrip() for line in lines).strip()


def problem_hash(source: str, shapes: str = "") -> str:
    """Content id of a problem: sha256 of its normalised source and its shapes."""
    text = normalise_source(source) + "\n--shapes--\n" + shapes.strip()
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _new_id() -> str:
    return uuid.uuid4().hex[:12]


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, default=str)


def decode_row(row: dict[str, Any]) -> dict[str, Any]:
    """Row with its JSON text columns parsed back into Python values."""
    out = dict(row)
    for key in JSON_COLUMNS:
        if isinstance(out.get(key), str):
            out[key] = json.loads(out[key])
    return out


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def attempt_row(report: Report | dict[str, Any], source: str) -> dict[str, Any]:
    """The attempt columns that come from a verifier report and the candidate source."""
    rep = report.to_dict() if isinstance(report, Report) else dict(report)
    metrics = rep.get("metrics") or {}
    env = rep.get("environment") or {}
    return {
        "backend": (rep.get("candidate") or {}).get("backend") or "",
        "source": source,
        "source_sha": source_sha256(source),
        "verdict": rep.get("verdict", "rejected"),
        "category": rep.get("category", "internal_error"),
        "message": rep.get("message", ""),
        "feedback": rep.get("feedback", ""),
        "timings": _dumps({s["name"]: s.get("seconds", 0.0) for s in rep.get("stages", [])}),
        "metrics": _dumps(metrics),
        **{k: _float(metrics.get(k)) for k in ("candidate_ms", "eager_ms", "compile_ms",
                                                "speedup_eager", "speedup_compile", "roofline_pct")},
        "roofline_bound": metrics.get("roofline_bound"),
        "gpu": env.get("gpu"),
        "versions": _dumps(env),
        "report": _dumps(rep),
    }


class Store:
    """Reads and writes of the memory database; safe to share between threads of one process."""

    def __init__(self, db: sqlite_utils.Database):
        self.db = db
        self._lock = threading.RLock()

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- low level ---------------------------------------------------------------------------

    def _write(self, fn: Callable[[sqlite_utils.Database], T]) -> T:
        with self._lock:
            return transact(self.db, fn)

    def write(self, fn: Callable[[sqlite_utils.Database], T]) -> T:
        """Run `fn(db)` in one committed write transaction (joined by the store's own writes inside it)."""
        return self._write(fn)

    def query(self, sql: str, params: tuple | dict = ()) -> list[dict[str, Any]]:
        """Rows of a read-only query, with JSON columns decoded."""
        with self._lock:
            return [decode_row(r) for r in self.db.query(sql, params)]

    def _one(self, sql: str, params: tuple | dict = ()) -> dict[str, Any] | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    # -- problems and runs -------------------------------------------------------------------

    def upsert_problem(self, *, name: str, source: str, shapes: str = "",
                       op_signature: list[str] | None = None) -> str:
        """Insert the problem if new (keyed by content hash) and refresh its op signature; return its id."""
        pid = problem_hash(source, shapes)
        row = {"id": pid, "name": name, "source": source, "shapes": shapes,
               "op_signature": _dumps(sorted(set(op_signature or []))), "created": now_iso()}

        def write(db: sqlite_utils.Database) -> None:
            db.table("problems").insert(row, ignore=True)
            if op_signature is not None:
                db.table("problems").update(pid, {"op_signature": row["op_signature"]})

        self._write(write)
        return pid

    def problem(self, problem: str) -> dict[str, Any] | None:
        """A problem by exact name (newest if several) or by id prefix."""
        return self._one("select * from problems where name = :p or substr(id, 1, length(:p)) = :p "
                         "order by (name = :p) desc, created desc limit 1", {"p": problem})

    def start_run(self, *, problem_id: str, provider: str, model: str, backend: str, budget: dict,
                  config: dict | None = None, kind: str = "optimize", batch_id: str | None = None,
                  problem_path: str | None = None) -> str:
        """Record the start of a run (`kind` optimize, or verify for a CLI or batch verification); return its id."""
        rid = _new_id()
        row = {"id": rid, "problem_id": problem_id, "provider": provider, "model": model,
               "backend": backend, "budget": _dumps(budget), "config": _dumps(config or {}),
               "status": "running", "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0,
               "best_attempt_id": None, "started": now_iso(), "finished": None, "kind": kind,
               "batch_id": batch_id, "problem_path": problem_path}
        self._write(lambda db: db.table("runs").insert(row))
        return rid

    def update_run(self, run_id: str, **fields: Any) -> None:
        """Set run fields (status, tokens_in, tokens_out, cost_usd, best_attempt_id, finished, ...).

        `finished=True` stamps the current time.
        """
        unknown = set(fields) - RUN_FIELDS
        if unknown:
            raise ValueError(f"unknown run fields {sorted(unknown)}; allowed: {sorted(RUN_FIELDS)}")
        if fields.get("finished") is True:
            fields["finished"] = now_iso()
        for key in ("budget", "config"):
            if key in fields:
                fields[key] = _dumps(fields[key])
        self._write(lambda db: db.table("runs").update(run_id, fields))

    def run(self, run_id: str) -> dict[str, Any] | None:
        """One run by id or unique id prefix; None if no match (AmbiguousIdError if several)."""
        full = self.resolve_id("runs", run_id)
        return self._one("select * from runs where id = ?", (full,)) if full else None

    def runs(self, limit: int = 20, *, kind: str | None = None, batch_id: str | None = None,
             problem: str | None = None) -> list[dict[str, Any]]:
        """Newest runs first, with their problem's name, attempt counts and best accepted speedup."""
        return self.query(_RUNS_SQL, {"n": limit, "kind": kind, "batch": batch_id, "p": problem})

    def resolve_id(self, table: str, prefix: str) -> str | None:
        """The full id in `table` that starts with `prefix` (ids are accepted by prefix everywhere).

        None when nothing matches; AmbiguousIdError when several rows do.
        """
        if table not in ID_TABLES:
            raise ValueError(f"no ids to resolve in {table!r}; tables with ids: {ID_TABLES}")
        if not prefix:
            return None
        rows = self.query(f"select id from {table} where substr(id, 1, length(:p)) = :p "
                          "order by (id = :p) desc limit 2", {"p": prefix})
        if len(rows) > 1 and rows[0]["id"] != prefix:
            raise AmbiguousIdError(f"id prefix {prefix!r} matches several {table}; give more characters")
        return rows[0]["id"] if rows else None

    # -- attempts ----------------------------------------------------------------------------

    def record_attempt(self, *, run_id: str | None, problem_id: str, source: str,
                       report: Report | dict[str, Any], turn: int = 0, parent_id: str | None = None,
                       candidate_index: int = 0, tokens: int = 0, cost_usd: float = 0.0) -> str:
        """Write one verified attempt, committed before returning; return its id."""
        aid = _new_id()
        row = {"id": aid, "run_id": run_id, "problem_id": problem_id, "parent_id": parent_id,
               "turn": turn, "candidate_index": candidate_index, **attempt_row(report, source),
               "tokens": tokens, "cost_usd": cost_usd, "created": now_iso()}
        if not row["backend"] and run_id is not None:
            run = self.run(run_id)
            row["backend"] = run["backend"] if run else ""
        self._write(lambda db: db.table("attempts").insert(row))
        return aid

    def attempt(self, attempt_id: str) -> dict[str, Any] | None:
        """One attempt by id or unique id prefix, with its problem's name; None if no match."""
        if not attempt_id:
            return None
        rows = self.query("select a.*, p.name as problem from attempts a left join problems p "
                          "on p.id = a.problem_id where substr(a.id, 1, length(:p)) = :p limit 2",
                          {"p": attempt_id})
        if len(rows) > 1:
            raise AmbiguousIdError(f"attempt id prefix {attempt_id!r} matches several attempts")
        return rows[0] if rows else None

    def attempts_for_run(self, run_id: str) -> list[dict[str, Any]]:
        """Every attempt of a run, in the order they were recorded."""
        return self.query("select * from attempts where run_id = ? order by created, rowid", (run_id,))

    def find_attempt_by_source(self, run_id: str, source_sha: str) -> dict[str, Any] | None:
        """The run's earlier attempt with this source hash (see `source_sha256`), so it is not re-verified."""
        return self._one("select * from attempts where run_id = ? and source_sha = ? "
                         "order by created limit 1", (run_id, source_sha))

    def history(self, problem: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Newest attempts first (without source); `problem` filters by exact name or id prefix."""
        where = "where p.name = :p or substr(a.problem_id, 1, length(:p)) = :p" if problem else ""
        sql = (f"select {HISTORY_COLUMNS} from attempts a left join problems p on p.id = a.problem_id "
               f"left join runs r on r.id = a.run_id {where} order by a.created desc, a.rowid desc limit :n")
        return self.query(sql, {"p": problem, "n": limit})

    # -- baselines and ceilings --------------------------------------------------------------

    def record_baseline(self, *, problem_id: str, gpu: str, eager_ms: float | None,
                        compile_ms: float | None, details: dict) -> None:
        """Store (or replace) the eager / torch.compile timings of a problem on one GPU."""
        row = {"problem_id": problem_id, "gpu": gpu, "eager_ms": eager_ms, "compile_ms": compile_ms,
               "details": _dumps(details), "created": now_iso()}
        self._write(lambda db: db.table("baselines").upsert(row, pk=("problem_id", "gpu")))

    def baseline(self, problem_id: str, gpu: str) -> dict[str, Any] | None:
        return self._one("select * from baselines where problem_id = ? and gpu = ?", (problem_id, gpu))

    def record_ceilings(self, gpu: str, ceilings: dict) -> None:
        """Store (or replace) the measured roofline ceilings of a GPU."""
        row = {"gpu": gpu, "ceilings": _dumps(ceilings), "created": now_iso()}
        self._write(lambda db: db.table("ceilings").upsert(row, pk="gpu"))

    def ceilings(self, gpu: str) -> dict[str, Any] | None:
        """The ceilings dict recorded for `gpu`, or None."""
        row = self._one("select ceilings from ceilings where gpu = ?", (gpu,))
        return row["ceilings"] if row else None

    # -- LLM exchanges and search ------------------------------------------------------------

    def log_exchange(self, *, run_id: str | None, turn: int, candidate_index: int, provider: str, model: str,
                     system: str | list[Any], messages: list[dict[str, str]], response: str,
                     input_tokens: int = 0, output_tokens: int = 0, cache_read_tokens: int = 0,
                     cache_write_tokens: int = 0, cost_usd: float = 0.0, duration_ms: float | None = None,
                     stop_reason: str | None = None, error: str | None = None) -> str:
        """Record one LLM call (what was sent, what came back, what it cost); return its id.

        `system` is a string or a list of prompt blocks (anything with `.text`); `messages` the provider-neutral
        conversation sent. Its attempt is the one with the same run, turn and candidate index.
        """
        eid = _new_id()
        if not isinstance(system, str):
            system = "\n\n".join(getattr(b, "text", str(b)) for b in system)
        prompt = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
        row = {"id": eid, "run_id": run_id, "turn": turn, "candidate_index": candidate_index,
               "provider": provider, "model": model, "system": system, "messages": _dumps(messages),
               "prompt": prompt, "response": response, "input_tokens": input_tokens,
               "output_tokens": output_tokens, "cache_read_tokens": cache_read_tokens,
               "cache_write_tokens": cache_write_tokens, "cost_usd": cost_usd, "duration_ms": duration_ms,
               "stop_reason": stop_reason, "error": error, "created": now_iso()}
        self._write(lambda db: db.table("exchanges").insert(row))
        return eid

    def exchanges(self, run_id: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
        """LLM calls, newest first (of one run when `run_id`, a full id or prefix, is given)."""
        where = "where substr(e.run_id, 1, length(:r)) = :r" if run_id else ""
        return self.query(f"select e.*, p.name as problem from exchanges e left join runs r on r.id = e.run_id "
                          f"left join problems p on p.id = r.problem_id {where} "
                          "order by e.created desc, e.rowid desc limit :n", {"r": run_id, "n": limit})

    def search(self, text: str, limit: int = 20) -> list[dict[str, Any]]:
        """Attempts (message, feedback, source) and LLM calls (prompt, reply) matching `text`, best first.

        Every word must occur (porter stemming); punctuation is taken literally.
        """
        query = fts_query(text)
        if not query:
            return []
        return self.query(_SEARCH_SQL, {"q": query, "n": limit})


_SEARCH_SQL = """
select * from (
  select 'attempt' as kind, a.id, a.run_id, p.name as problem, a.verdict, a.category, a.created,
         snippet(attempts_fts, -1, '[', ']', '…', 12) as snippet, bm25(attempts_fts) as rank
  from attempts_fts join attempts a on a.rowid = attempts_fts.rowid
  left join problems p on p.id = a.problem_id where attempts_fts match :q
  union all
  select 'exchange' as kind, e.id, e.run_id, p.name as problem, null, null, e.created,
         snippet(exchanges_fts, -1, '[', ']', '…', 12) as snippet, bm25(exchanges_fts) as rank
  from exchanges_fts join exchanges e on e.rowid = exchanges_fts.rowid
  left join runs r on r.id = e.run_id left join problems p on p.id = r.problem_id where exchanges_fts match :q
) order by rank, created desc limit :n
"""


def fts_query(text: str) -> str:
    """An FTS5 query where each word of `text` is a quoted term (so `tl.dot` or `a-b` are not syntax)."""
    return " ".join('"' + word.replace('"', '""') + '"' for word in text.split())
