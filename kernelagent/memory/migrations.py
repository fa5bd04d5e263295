"""Schema of the memory database as small named migrations, applied in order by `migrate(db)` at open.

Each migration runs once; its name goes into `_migrations`. Never edit a released migration: add a new
one at the end. `migrate` holds the write lock while it checks and applies, so processes that open the
database at the same moment apply each migration exactly once.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable

import sqlite_utils

from kernelagent.memory.db import transact

Migration = Callable[[sqlite_utils.Database], None]
MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    """Register `fn` as the next migration; its function name is its permanent id."""
    MIGRATIONS.append(fn)
    return fn


@migration
def m001_problems_runs_attempts(db: sqlite_utils.Database) -> None:
    db.table("problems").create(
        {"id": str, "name": str, "source": str, "shapes": str, "op_signature": str, "created": str},
        pk="id",
    )
    db.table("runs").create(
        {
            "id": str, "problem_id": str, "provider": str, "model": str, "backend": str,
            "budget": str, "config": str, "status": str, "tokens_in": int, "tokens_out": int,
            "cost_usd": float, "best_attempt_id": str, "started": str, "finished": str,
        },
        pk="id",
        foreign_keys=[("problem_id", "problems", "id")],
    )
    db.table("attempts").create(
        {
            "id": str, "run_id": str, "problem_id": str, "parent_id": str, "turn": int,
            "candidate_index": int, "backend": str, "source": str, "source_sha": str,
            "verdict": str, "category": str, "message": str, "feedback": str,
            "timings": str, "metrics": str, "candidate_ms": float, "eager_ms": float,
            "compile_ms": float, "speedup_eager": float, "speedup_compile": float,
            "roofline_pct": float, "roofline_bound": str, "gpu": str, "versions": str,
            "tokens": int, "cost_usd": float, "report": str, "created": str,
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id"), ("problem_id", "problems", "id")],
    )


@migration
def m002_lookup_indexes(db: sqlite_utils.Database) -> None:
    attempts = db.table("attempts")
    attempts.create_index(["run_id", "source_sha"])
    attempts.create_index(["problem_id", "created"])
    attempts.create_index(["backend", "verdict"])
    attempts.create_index(["parent_id"])
    db.table("runs").create_index(["problem_id"])
    db.table("problems").create_index(["name"])


@migration
def m003_baselines_ceilings(db: sqlite_utils.Database) -> None:
    db.table("baselines").create(
        {"problem_id": str, "gpu": str, "eager_ms": float, "compile_ms": float, "details": str,
         "created": str},
        pk=("problem_id", "gpu"),
        foreign_keys=[("problem_id", "problems", "id")],
    )
    db.table("ceilings").create({"gpu": str, "ceilings": str, "created": str}, pk="gpu")



@migration
def m004_run_kinds_and_batches(db: sqlite_utils.Database) -> None:
    runs = db.table("runs")
    runs.add_column("kind", str, not_null_default="optimize")  # optimize | verify
    runs.add_column("batch_id", str)
    runs.add_column("problem_path", str)
    runs.create_index(["batch_id"])
    db.table("batches").create(
        {"id": str, "key": str, "mode": str, "inputs": str, "options": str, "status": str, "started": str,
         "finished": str, "summary": str},
        pk="id",
    )
    db.table("batches").create_index(["key"])
    db.table("batch_items").create(
        {"batch_id": str, "problem_id": str, "candidate_sha": str, "problem_path": str, "candidate_path": str,
         "problem": str, "run_id": str, "attempt_id": str, "status": str, "verdict": str, "category": str,
         "seconds": float, "worker": str, "created": str},
        pk=("batch_id", "problem_id", "candidate_sha"),
        foreign_keys=[("batch_id", "batches", "id")],
    )


@migration
def m005_exchanges(db: sqlite_utils.Database) -> None:
    db.table("exchanges").create(
        {"id": str, "run_id": str, "turn": int, "candidate_index": int, "provider": str, "model": str,
         "system": str, "messages": str, "prompt": str, "response": str, "input_tokens": int,
         "output_tokens": int, "cache_read_tokens": int, "cache_write_tokens": int, "cost_usd": float,
         "duration_ms": float, "stop_reason": str, "error": str, "created": str},
        pk="id",
        foreign_keys=[("run_id", "runs", "id")],
    )
    db.table("exchanges").create_index(["run_id", "turn", "candidate_index"])


def _fts(db: sqlite_utils.Database, table: str, columns: list[str]) -> None:
    """An FTS5 index `<table>_fts` kept in step by triggers, named as sqlite-utils and Datasette expect.

    Written out statement by statement: sqlite-utils' `enable_fts` uses executescript, which would
    commit the migration's transaction half-way.
    """
    cols, new = ", ".join(columns), ", ".join(f"new.{c}" for c in columns)
    old = ", ".join(f"old.{c}" for c in columns)
    fts = f"{table}_fts"
    db.execute(f"create virtual table {fts} using fts5({cols}, tokenize='porter', content={table})")
    db.execute(f"insert into {fts} (rowid, {cols}) select rowid, {cols} from {table}")
    db.execute(f"create trigger {table}_ai after insert on {table} begin "
               f"insert into {fts} (rowid, {cols}) values (new.rowid, {new}); end")
    db.execute(f"create trigger {table}_ad after delete on {table} begin "
               f"insert into {fts} ({fts}, rowid, {cols}) values ('delete', old.rowid, {old}); end")
    db.execute(f"create trigger {table}_au after update on {table} begin "
               f"insert into {fts} ({fts}, rowid, {cols}) values ('delete', old.rowid, {old}); "
               f"insert into {fts} (rowid, {cols}) values (new.rowid, {new}); end")


@migration
def m006_full_text_search(db: sqlite_utils.Database) -> None:
    _fts(db, "attempts", ["message", "feedback", "source"])
    _fts(db, "exchanges", ["prompt", "response"])


@migration
def m007_compile_only_is_unverified(db: sqlite_utils.Database) -> None:
    """CuTe DSL kernels verified without a GPU were recorded as accepted (metrics.compile_only) before
    the verdict `unverified` existed: they are unverified, and no run's best attempt."""
    old = ("select id from attempts where verdict = 'accepted' and json_valid(metrics) "
           "and json_extract(metrics, '$.compile_only')")
    db.execute(f"update runs set best_attempt_id = null where best_attempt_id in ({old})")
    db.execute(f"update batch_items set verdict = 'unverified', category = 'compile_only' where attempt_id in ({old})")
    db.execute(f"update attempts set verdict = 'unverified', category = 'compile_only' where id in ({old})")


def applied(db: sqlite_utils.Database) -> list[str]:
    """Names of the migrations already applied to `db`, oldest first."""
    if not db.table("_migrations").exists():
        return []
    return [r["name"] for r in db.query("select name from _migrations order by rowid")]


def migrate(db: sqlite_utils.Database, upto: str | None = None) -> list[str]:
    """Apply every pending migration (or those up to and including `upto`); return the names applied."""
    names = [fn.__name__ for fn in MIGRATIONS]
    if upto is not None and upto not in names:
        raise ValueError(f"unknown migration {upto!r}; known: {names}")
    if set(names) <= set(applied(db)):
        return []  # fast path without taking the write lock

    def apply(db: sqlite_utils.Database) -> list[str]:
        db.execute("create table if not exists _migrations (name text primary key, applied_at text)")
        done, ran = set(applied(db)), []
        for fn in MIGRATIONS:
            if fn.__name__ not in done:
                fn(db)
                now = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
                db.table("_migrations").insert({"name": fn.__name__, "applied_at": now})
                ran.append(fn.__name__)
            if fn.__name__ == upto:
                break
        return ran

    return transact(db, apply)
