"""The schema: migrations are named, applied once, and upgrade an older database."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelagent.memory import default_home, open_store
from kernelagent.memory.db import open_db
from kernelagent.memory.migrations import MIGRATIONS, applied, migrate

EXPECTED_COLUMNS = {
    "problems": {"id", "name", "source", "shapes", "op_signature", "created"},
    "runs": {"id", "problem_id", "provider", "model", "backend", "budget", "config", "status", "tokens_in",
             "tokens_out", "cost_usd", "best_attempt_id", "started", "finished", "kind", "batch_id", "problem_path"},
    "attempts": {"id", "run_id", "problem_id", "parent_id", "turn", "candidate_index", "backend", "source",
                 "source_sha", "verdict", "category", "message", "feedback", "timings", "metrics",
                 "candidate_ms", "eager_ms", "compile_ms", "speedup_eager", "speedup_compile",
                 "roofline_pct", "roofline_bound", "gpu", "versions", "tokens", "cost_usd", "report",
                 "created"},
    "baselines": {"problem_id", "gpu", "eager_ms", "compile_ms", "details", "created"},
    "ceilings": {"gpu", "ceilings", "created"},
    "batches": {"id", "key", "mode", "inputs", "options", "status", "started", "finished", "summary"},
    "batch_items": {"batch_id", "problem_id", "candidate_sha", "problem_path", "candidate_path", "problem", "run_id",
                    "attempt_id", "status", "verdict", "category", "seconds", "worker", "created"},
    "exchanges": {"id", "run_id", "turn", "candidate_index", "provider", "model", "system", "messages", "prompt",
                  "response", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd",
                  "duration_ms", "stop_reason", "error", "created"},
}


def test_schema_has_every_table_and_column(store):
    for table, columns in EXPECTED_COLUMNS.items():
        assert set(store.db.table(table).columns_dict) == columns, table
    assert store.db.journal_mode == "wal"
    assert store.db.table("baselines").pks == ["problem_id", "gpu"]


def test_migrations_are_idempotent(tmp_path: Path):
    names = [fn.__name__ for fn in MIGRATIONS]
    with open_store(tmp_path) as first:
        assert applied(first.db) == names
        assert migrate(first.db) == []
    with open_store(tmp_path) as second:
        assert applied(second.db) == names
        assert second.db.table("_migrations").count == len(names)


def test_database_from_first_migration_is_upgraded(tmp_path: Path):
    assert len(MIGRATIONS) > 1
    first = MIGRATIONS[0].__name__
    db = open_db(tmp_path / "kernelagent.db")
    assert migrate(db, upto=first) == [first]
    assert not db.table("baselines").exists()
    assert "idx_attempts_run_id_source_sha" not in {i.name for i in db.table("attempts").indexes}
    db.table("problems").insert({"id": "p1", "name": "old", "source": "x", "shapes": "",
                                 "op_signature": "[]", "created": "2024-01-01"})
    db.close()
    with open_store(tmp_path) as store:
        assert applied(store.db) == [fn.__name__ for fn in MIGRATIONS]
        assert store.db.table("baselines").exists() and store.db.table("ceilings").exists()
        assert "idx_attempts_run_id_source_sha" in {i.name for i in store.db.table("attempts").indexes}
        assert store.problem("old")["id"] == "p1"  # rows survive the upgrade


def test_compile_only_acceptances_become_unverified(tmp_path: Path):
    """m007: attempts recorded as accepted on compilation alone (no GPU) are unverified after the upgrade,
    and stop being a run's best attempt; a real acceptance is left alone."""
    db = open_db(tmp_path / "kernelagent.db")
    migrate(db, upto="m006_full_text_search")
    db.table("problems").insert({"id": "p1", "name": "p", "source": "x", "shapes": "", "op_signature": "[]",
                                 "created": "2026-12-01"})
    db.table("batches").insert({"id": "b", "key": "k", "mode": "verify", "status": "done"})
    for rid, aid, metrics in (("r1", "a1", '{"compile_only": true}'), ("r2", "a2", '{"trials": 9}')):
        db.table("runs").insert({"id": rid, "problem_id": "p1", "status": "accepted", "best_attempt_id": aid})
        db.table("attempts").insert({"id": aid, "run_id": rid, "problem_id": "p1", "verdict": "accepted",
                                     "category": "ok", "metrics": metrics, "source": "", "message": "", "feedback": ""})
        db.table("batch_items").insert({"batch_id": "b", "problem_id": "p1", "candidate_sha": aid, "attempt_id": aid,
                                        "verdict": "accepted", "category": "ok"})
    db.close()
    with open_store(tmp_path) as store:
        attempts = {r["id"]: (r["verdict"], r["category"]) for r in store.db.table("attempts").rows}
        assert attempts == {"a1": ("unverified", "compile_only"), "a2": ("accepted", "ok")}
        assert {r["id"]: r["best_attempt_id"] for r in store.db.table("runs").rows} == {"r1": None, "r2": "a2"}
        items = {r["attempt_id"]: r["verdict"] for r in store.db.table("batch_items").rows}
        assert items == {"a1": "unverified", "a2": "accepted"}


def test_migrate_rejects_unknown_name(store):
    with pytest.raises(ValueError, match="unknown migration"):
        migrate(store.db, upto="m999_nothing")


def test_default_home_follows_environment(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("KERNELAGENT_HOME", str(tmp_path / "ka"))
    assert default_home() == tmp_path / "ka"
    with open_store() as store:
        db_file = store.db.conn.execute("pragma database_list").fetchone()[2]
        assert db_file == str(tmp_path / "ka" / "kernelagent.db")
    monkeypatch.delenv("KERNELAGENT_HOME")
    assert default_home() == Path.home() / ".kernelagent"
