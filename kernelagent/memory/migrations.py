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
