"""Several processes writing into one database at once lose no rows and never see "database is locked"."""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernelagent.memory import open_store
from kernelagent.memory.migrations import MIGRATIONS

WRITERS, ROWS = 4, 200
REPORT = {"verdict": "rejected", "category": "mismatch", "feedback": "off by one",
          "candidate": {"backend": "triton"}, "metrics": {}, "environment": {"gpu": "H200"}}


def _writer(home: str, index: int, barrier) -> None:
    """Open the store (racing the others through migration), then write ROWS attempts one by one."""
    barrier.wait()
    with open_store(Path(home)) as store:
        pid = store.upsert_problem(name="shared", source="x = 1\n", op_signature=["aten.add.Tensor"])
        rid = store.start_run(problem_id=pid, provider="p", model="m", backend="triton", budget={})
        for turn in range(ROWS):
            store.record_attempt(run_id=rid, problem_id=pid, source=f"# writer {index} turn {turn}\n",
                                 report=REPORT, turn=turn)
        store.update_run(rid, status="done", finished=True)


def test_four_processes_write_concurrently(tmp_path: Path):
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(WRITERS)
    home = tmp_path / "fresh-home"  # not created yet: the writers also race to create and migrate it
    procs = [ctx.Process(target=_writer, args=(str(home), i, barrier)) for i in range(WRITERS)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    assert [proc.exitcode for proc in procs] == [0] * WRITERS  # a writer that raised exits with 1
    with open_store(home) as store:
        assert store.db.table("attempts").count == WRITERS * ROWS
        assert store.db.table("problems").count == 1
        assert [r["status"] for r in store.runs()] == ["done"] * WRITERS
        for run in store.runs():
            assert [a["turn"] for a in store.attempts_for_run(run["id"])] == list(range(ROWS))
        assert store.db.table("_migrations").count == len(MIGRATIONS)


def test_threads_share_one_store(store):
    pid = store.upsert_problem(name="threads", source="y = 2\n")

    def write(index: int) -> None:
        for turn in range(50):
            store.record_attempt(run_id=None, problem_id=pid, source=f"# {index} {turn}\n", report=REPORT)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, range(4)))  # re-raises any writer's exception
    assert store.db.table("attempts").count == 200


def test_write_joins_an_open_transaction(store):
    with pytest.raises(RuntimeError), store.db.atomic():
        store.upsert_problem(name="rolled back", source="z = 3\n")
        raise RuntimeError("abort")
    assert store.db.table("problems").count == 0
