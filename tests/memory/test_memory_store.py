"""Store round trips: problems, runs, attempts, baselines, ceilings, history and the history views."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from kernelagent.cli.history_render import AttemptNotFoundError, attempt_detail, export_jsonl, history_table
from kernelagent.memory import AmbiguousIdError, source_sha256
from kernelagent.memory.store import problem_hash

SOFTMAX = ("import torch\n\nclass Model(torch.nn.Module):\n"
           "    def forward(self, x):\n        return x.softmax(-1)\n")
KERNEL = "import triton\n\n@triton.jit\ndef k(x_ptr):\n    pass\n"


def _add(store, run, rep, source: str = KERNEL, **kw) -> str:
    pid, rid = run
    return store.record_attempt(run_id=rid, problem_id=pid, source=source, report=rep, **kw)


def _render(renderable) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


@pytest.fixture
def run(store):
    pid = store.upsert_problem(name="softmax", source=SOFTMAX, shapes="x: (4, 8)",
                               op_signature=["aten._softmax.default"])
    rid = store.start_run(problem_id=pid, provider="anthropic", model="claude", backend="triton",
                          budget={"turns": 4, "usd": 2.0}, config={"k": 2})
    return pid, rid


def test_problem_id_ignores_comments_but_not_shapes(store):
    commented = SOFTMAX.replace("return", "# the reference\n        return")
    assert problem_hash(commented, "x: (4, 8)") == problem_hash(SOFTMAX, "x: (4, 8)")
    assert problem_hash(SOFTMAX, "x: (4, 16)") != problem_hash(SOFTMAX, "x: (4, 8)")
    first = store.upsert_problem(name="softmax", source=SOFTMAX, op_signature=["b", "a", "a"])
    again = store.upsert_problem(name="softmax-renamed", source=commented)
    assert first == again
    row = store.problem(first[:10])
    assert row["name"] == "softmax" and row["op_signature"] == ["a", "b"]  # sorted, deduplicated, kept


def test_record_attempt_from_report_and_dict(store, run, report):
    pid, rid = run
    accepted = store.record_attempt(run_id=rid, problem_id=pid, source=KERNEL, report=report(speedup=2.0),
                                    turn=1, tokens=1200, cost_usd=0.01)
    as_dict = report("rejected", "mismatch", feedback="max abs err 3.2").to_dict()
    rejected = store.record_attempt(run_id=rid, problem_id=pid, source=KERNEL + "#2\n", parent_id=accepted,
                                    report=as_dict, turn=2, candidate_index=1)
    row = store.attempt(accepted)
    assert (row["verdict"], row["category"], row["backend"]) == ("accepted", "ok", "triton")
    assert row["gpu"] == "NVIDIA H200"
    assert row["speedup_eager"] == 2.0 and row["roofline_pct"] == 71.5 and row["roofline_bound"] == "memory"
    assert row["metrics"]["speedup_eager_ci"] == [1.4, 1.6]
    assert row["timings"] == {"load": 0.1, "correctness": 2.5}
    assert row["versions"]["triton"] == "3.6.0" and row["tokens"] == 1200 and row["problem"] == "softmax"
    assert row["report"]["candidate"]["backend"] == "triton"
    other = store.attempt(rejected)
    assert (other["parent_id"], other["candidate_index"]) == (accepted, 1)
    assert other["feedback"] == "max abs err 3.2"
    assert other["speedup_eager"] is None
    assert [a["id"] for a in store.attempts_for_run(rid)] == [accepted, rejected]


def test_backend_falls_back_to_the_run(store, run, report):
    pid, rid = run
    rep = report().to_dict()
    rep["candidate"] = {}
    assert store.attempt(store.record_attempt(run_id=rid, problem_id=pid, source=KERNEL, report=rep))[
        "backend"] == "triton"


def test_find_attempt_by_source(store, run, report):
    pid, rid = run
    aid = store.record_attempt(run_id=rid, problem_id=pid, source=KERNEL, report=report())
    assert store.find_attempt_by_source(rid, source_sha256(KERNEL))["id"] == aid
    assert store.find_attempt_by_source(rid, source_sha256(KERNEL + " ")) is None
    other_run = store.start_run(problem_id=pid, provider="p", model="m", backend="triton", budget={})
    assert store.find_attempt_by_source(other_run, source_sha256(KERNEL)) is None


def test_attempt_by_prefix(store, run, report):
    ids = [_add(store, run, report()) for _ in range(40)]
    assert store.attempt(ids[0][:8])["id"] == ids[0]
    assert store.attempt("zz") is None and store.attempt("") is None
    shared = next(c for c in "0123456789abcdef" if sum(i.startswith(c) for i in ids) > 1)
    with pytest.raises(AmbiguousIdError):
        store.attempt(shared)


def test_update_run_and_runs(store, run, report):
    pid, rid = run
    aid = store.record_attempt(run_id=rid, problem_id=pid, source=KERNEL, report=report())
    store.update_run(rid, status="done", tokens_in=10, tokens_out=20, cost_usd=0.5, best_attempt_id=aid,
                     finished=True)
    row = store.run(rid)
    assert (row["status"], row["tokens_in"], row["tokens_out"]) == ("done", 10, 20)
    assert row["best_attempt_id"] == aid
    assert row["finished"] and row["budget"] == {"turns": 4, "usd": 2.0} and row["config"] == {"k": 2}
    assert store.runs()[0]["problem"] == "softmax"
    with pytest.raises(ValueError, match="unknown run fields"):
        store.update_run(rid, verdict="accepted")


def test_baselines_and_ceilings_replace(store, run):
    pid, _ = run
    assert store.baseline(pid, "H200") is None and store.ceilings("H200") is None
    store.record_baseline(problem_id=pid, gpu="H200", eager_ms=1.0, compile_ms=0.8, details={"n": 1})
    store.record_baseline(problem_id=pid, gpu="H200", eager_ms=0.9, compile_ms=None, details={"n": 2})
    store.record_baseline(problem_id=pid, gpu="A100", eager_ms=2.0, compile_ms=1.5, details={})
    row = store.baseline(pid, "H200")
    assert (row["eager_ms"], row["compile_ms"], row["details"]) == (0.9, None, {"n": 2})
    assert store.db.table("baselines").count == 2
    store.record_ceilings("H200", {"hbm_gbps": 4000.0})
    store.record_ceilings("H200", {"hbm_gbps": 4200.0, "bf16_tflops": 800.0})
    assert store.ceilings("H200") == {"hbm_gbps": 4200.0, "bf16_tflops": 800.0}


def test_history_filters_by_problem(store, run, report):
    other = store.upsert_problem(name="gelu", source="def gelu(x): return x\n")
    mine = [_add(store, run, report()) for _ in range(3)]
    theirs = store.record_attempt(run_id=None, problem_id=other, source=KERNEL, report=report())
    assert [r["id"] for r in store.history("softmax")] == mine[::-1]
    assert [r["id"] for r in store.history(other[:8])] == [theirs]
    assert len(store.history()) == 4 and len(store.history(limit=2)) == 2
    assert store.history("nope") == []
    assert "source" not in store.history()[0]


def test_history_table_and_detail(store, run, report):
    aid = _add(store, run, report(speedup=2.5))
    _add(store, run, report("rejected", "compile_error"))
    table = _render(history_table(store, "softmax"))
    assert aid[:8] in table and "2.50x" in table and "compile_error" in table
    detail = _render(attempt_detail(store, aid[:8]))
    assert "@triton.jit" in detail and "correctness" in detail and "2.50x vs eager" in detail
    with pytest.raises(AttemptNotFoundError):
        attempt_detail(store, "zzzz")


def test_export_jsonl_round_trip(store, run, report):
    reports = [report("rejected", "mismatch") if i % 2 else report() for i in range(5)]
    ids = [_add(store, run, rep, source=KERNEL + f"# {i}\n", turn=i) for i, rep in enumerate(reports)]
    fp = io.StringIO()
    assert export_jsonl(store, fp) == 5
    lines = [json.loads(line) for line in fp.getvalue().splitlines()]
    assert [line["id"] for line in lines] == ids
    for line in lines:
        stored = store.attempt(line["id"])
        assert {k: line[k] for k in stored} == stored
        assert line["provider"] == "anthropic" and line["op_signature"] == ["aten._softmax.default"]
    assert export_jsonl(store, io.StringIO(), problem="gelu") == 0
