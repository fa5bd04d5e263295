"""History at the level of `llm logs`: LLM exchanges in their own table, verify runs, id prefixes, full-text
search, exports, the KernelBench summary of a batch, and the history table at 80 columns."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from rich.console import Console

from kernelagent.cli.history_render import export_jsonl, history_table, runs_table
from kernelagent.memory import AmbiguousIdError, open_store
from kernelagent.memory import batches as B
from kernelagent.memory.db import open_db
from kernelagent.memory.migrations import MIGRATIONS, migrate
from kernelagent.problem import inspect_problem
from tests.memory.conftest import make_report

PROBLEM = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n" \
          "def get_inputs():\n    return [torch.randn(4)]\n"


def _run(store, name="double", kind="optimize"):
    pid = store.upsert_problem(name=name, source=PROBLEM + f"# {name}\n")
    return pid, store.start_run(problem_id=pid, provider="replay", model="m", backend="triton", budget={},
                                kind=kind)


def test_exchanges_are_logged_and_joined_to_their_run(store):
    _, rid = _run(store)
    system = [type("Block", (), {"text": "You write Triton kernels."})()]
    eid = store.log_exchange(run_id=rid, turn=1, candidate_index=0, provider="replay", model="m", system=system,
                             messages=[{"role": "user", "content": "make x*2 fast"}], response="```python\n...```",
                             input_tokens=120, output_tokens=40, cost_usd=0.01, duration_ms=812.0,
                             stop_reason="end_turn")
    [row] = store.exchanges(rid[:5])
    assert row["id"] == eid and row["problem"] == "double"
    assert row["system"] == "You write Triton kernels." and row["prompt"] == "make x*2 fast"
    assert row["messages"] == '[{"content": "make x*2 fast", "role": "user"}]'
    assert (row["input_tokens"], row["output_tokens"], row["stop_reason"]) == (120, 40, "end_turn")
    # a plain sqlite-utils / Datasette user sees the same table
    assert store.db.table("exchanges").count == 1


def test_search_finds_feedback_sources_and_replies(store):
    pid, rid = _run(store)
    store.record_attempt(run_id=rid, problem_id=pid, source="tl.dot(a, b) # uses tensor cores",
                         report=make_report("rejected", "mismatch", feedback="max abs error 0.25 at [7, 511]"))
    store.record_attempt(run_id=rid, problem_id=pid, source="x = 1", report=make_report())
    store.log_exchange(run_id=rid, turn=1, candidate_index=1, provider="replay", model="m", system="s",
                       messages=[{"role": "user", "content": "why the mismatch?"}], response="swizzled tiles")
    hits = store.search("tl.dot")
    assert [(h["kind"], h["category"]) for h in hits] == [("attempt", "mismatch")]
    assert "[tl" in hits[0]["snippet"] or "[dot]" in hits[0]["snippet"]
    assert {h["kind"] for h in store.search("mismatch")} == {"attempt", "exchange"}
    assert [h["kind"] for h in store.search("swizzled tile")] == ["exchange"]  # porter stemming: tile ~ tiles
    assert store.search("no-such-word") == [] and store.search("   ") == []


def test_id_prefixes_resolve_and_ambiguity_is_an_error(store):
    _, rid = _run(store)
    assert store.run(rid[:4])["id"] == rid
    assert store.resolve_id("runs", "zzzz") is None
    for _ in range(40):  # enough runs that some share their first hex digit
        _run(store, name="other")
    ids = [r["id"] for r in store.runs(100)]
    shared = next(i[0] for i in ids if sum(j[0] == i[0] for j in ids) > 1)
    with pytest.raises(AmbiguousIdError, match="several runs"):
        store.run(shared)
    with pytest.raises(ValueError):
        store.resolve_id("problems", "x")


def test_verify_runs_are_logged_with_kind_and_listed(store, tmp_path):
    problem = tmp_path / "double.py"
    problem.write_text(PROBLEM)
    aid = B.record_verification(store, problem_path=problem, problem_name="double", candidate_source="k = 1",
                                report=make_report())
    attempt = store.attempt(aid)
    run = store.run(attempt["run_id"])
    assert (run["kind"], run["status"], run["best_attempt_id"], run["problem_path"]) == \
        ("verify", "finished", aid, str(problem))
    [listed] = store.runs(kind="verify")
    assert (listed["attempts"], listed["accepted"], listed["best_speedup"]) == (1, 1, 1.5)
    assert store.runs(kind="optimize") == []
    table = runs_table(store.runs(), width=80)
    text = _render(table, 80)
    for header in ("run", "kind", "problem", "status", "attempts", "best"):
        assert header in text


def _render(table, width):
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(table)
    return console.export_text()


def test_history_at_80_columns_keeps_every_header_whole(store):
    pid, rid = _run(store, name="a_rather_long_problem_name_from_kernelbench_level_two")
    store.record_attempt(run_id=rid, problem_id=pid, source="s", report=make_report())
    text = _render(history_table(store, width=80), 80)
    header = next(line for line in text.splitlines() if "verdict" in line)
    assert "…" not in header
    for name in ("attempt", "problem", "turn", "verdict", "ms", "vs eager"):
        assert name in header
    assert max(len(line) for line in text.splitlines()) <= 80
    wide = _render(history_table(store, width=160), 160)
    assert "vs compile" in wide and "GPU" in wide


def test_export_each_table_as_json_lines(store):
    pid, rid = _run(store)
    store.record_attempt(run_id=rid, problem_id=pid, source="s", report=make_report())
    store.log_exchange(run_id=rid, turn=1, candidate_index=0, provider="p", model="m", system="s",
                       messages=[{"role": "user", "content": "hi"}], response="hello")
    for table, key in (("attempts", "verdict"), ("runs", "kind"), ("exchanges", "response")):
        buf = io.StringIO()
        assert export_jsonl(store, buf, table=table) == 1
        row = json.loads(buf.getvalue())
        assert key in row and row["problem"] == "double"
    assert export_jsonl(store, io.StringIO(), problem="nothing-like-this") == 0


def test_upgrade_indexes_old_attempts_for_search(tmp_path: Path):
    db = open_db(tmp_path / "kernelagent.db")
    migrate(db, upto="m003_baselines_ceilings")
    db.table("problems").insert({"id": "p1", "name": "old", "source": "x", "shapes": "", "op_signature": "[]",
                                 "created": "2024"})
    db.table("runs").insert({"id": "r1", "problem_id": "p1", "status": "finished", "started": "2024"})
    db.table("attempts").insert({"id": "a1", "run_id": "r1", "problem_id": "p1", "source": "s", "verdict": "rejected",
                                 "category": "nan_inf", "feedback": "outputs hold NaN where the reference is finite",
                                 "message": "", "created": "2024"})
    db.close()
    with open_store(tmp_path) as store:
        assert [m.__name__ for m in MIGRATIONS][-1] in {r["name"] for r in store.query("select name from _migrations")}
        assert [h["id"] for h in store.search("reference finite")] == ["a1"]
        assert store.run("r1")["kind"] == "optimize"


def test_problem_name_is_kept_when_run_from_its_own_folder(tmp_path, monkeypatch):
    folder = tmp_path / "gelu"
    folder.mkdir()
    (folder / "op.py").write_text(PROBLEM)
    monkeypatch.chdir(folder)
    spec = inspect_problem("op.py")
    assert spec.name == "gelu"
    with open_store(tmp_path / "home") as store:
        pid = store.upsert_problem(name=spec.name, source=spec.source)
        assert store.problem("gelu")["id"] == pid


# -- the batch summary ------------------------------------------------------------------------------------


def _item(problem, cand, verdict, eager=None, compile_=None, status="done", category=None):
    category = category or ("ok" if verdict == "accepted" else "mismatch")
    return {"problem_id": problem, "problem": problem, "problem_path": f"/p/{problem}.py", "candidate_path": cand,
            "status": status, "verdict": verdict, "category": category, "attempt_id": f"{problem}-{cand}",
            "speedup_eager": eager, "speedup_compile": compile_}


def test_summary_in_kernelbench_terms():
    rows = [_item("a", "k1", "accepted", 2.0, 1.2), _item("a", "k2", "accepted", 0.9, 0.5),
            _item("b", "k1", "accepted", 1.2, 0.8), _item("c", "k1", "rejected"),
            _item("d", "", None, status=B.NO_CANDIDATE)]
    s = B.summarize(rows, "b1", "verify")
    assert (s["problems"], s["evaluated"], s["no_candidate"], s["candidates"], s["correct"]) == (4, 3, 1, 4, 2)
    assert s["correct_pct"] == pytest.approx(200 / 3)
    assert s["eager"]["fast_0"] == pytest.approx(2 / 3)
    assert s["eager"]["fast_1"] == pytest.approx(2 / 3)      # a (best 2.0x) and b (1.2x)
    assert s["eager"]["fast_1.5"] == pytest.approx(1 / 3)    # a only
    assert s["eager"]["geomean_speedup"] == pytest.approx((2.0 * 1.2) ** 0.5)
    assert s["compile"]["fast_1"] == pytest.approx(1 / 3)    # a's best kernel (by eager) is 1.2x vs compile
    a = next(p for p in s["per_problem"] if p["problem"] == "a")
    assert a["best_candidate"] == "k1" and a["failures"] == {}
    assert next(p for p in s["per_problem"] if p["problem"] == "c")["failures"] == {"mismatch": 1}
    assert B.summarize(list(reversed(rows)), "b1", "verify") == s  # order of rows does not matter


def test_summary_without_timings_says_not_measured():
    s = B.summarize([_item("a", "k", "accepted"), _item("b", "k", "rejected")])
    assert s["speed_measured"] is False and s["eager"]["fast_0"] == 0.5
    assert s["eager"]["fast_1"] is None and s["eager"]["geomean_speedup"] is None


def test_summary_counts_compiled_but_unverified_apart_from_correct_and_failed():
    """A problem whose best candidate only compiled (CuTe DSL, no GPU) is neither correct nor a failure."""
    rows = [_item("a", "k", "accepted"), _item("b", "k", "unverified", category="compile_only"),
            _item("c", "k1", "unverified", category="compile_only"), _item("c", "k2", "rejected"),
            _item("d", "k", "rejected"), _item("e", "k1", "accepted"), _item("e", "k2", "unverified",
                                                                               category="compile_only")]
    s = B.summarize(rows)
    assert (s["evaluated"], s["correct"], s["unverified"]) == (5, 2, 2)  # b and c; e is correct
    assert s["eager"]["fast_0"] == pytest.approx(2 / 5)
    assert s["failures"] == {"mismatch": 2} and "compile_only" not in s["failures"]
    per = {p["problem"]: p for p in s["per_problem"]}
    assert not per["b"]["correct"] and per["b"]["unverified"] == 1 and per["b"]["failures"] == {}
    assert per["c"]["unverified"] == 1 and per["c"]["failures"] == {"mismatch": 1}
    assert per["e"]["correct"] and per["e"]["best_candidate"] == "k1"


def test_batches_are_found_again_by_their_key(store):
    first, resumed = B.open_batch(store, mode="verify", inputs=["/a.py", "/b.py"], options={"seeds": 1})
    again, resumed_again = B.open_batch(store, mode="verify", inputs=["/b.py", "/a.py"], options={"seeds": 1})
    assert (resumed, again, resumed_again) == (False, first, True)
    other, _ = B.open_batch(store, mode="verify", inputs=["/a.py"], options={"seeds": 1})
    fresh, _ = B.open_batch(store, mode="verify", inputs=["/a.py", "/b.py"], options={"seeds": 1}, new=True)
    assert len({first, other, fresh}) == 3
    assert B.open_batch(store, mode="verify", inputs=[], options={}, resume=first[:6]) == (first, True)
    with pytest.raises(LookupError):
        B.open_batch(store, mode="verify", inputs=[], options={}, resume="nope")


def test_history_cli_runs_search_logs(store, monkeypatch):
    from typer.testing import CliRunner

    from kernelagent.cli.app import app

    home = Path(os.environ["KERNELAGENT_HOME"])
    with open_store(home) as s:
        pid, rid = _run(s)
        s.record_attempt(run_id=rid, problem_id=pid, source="kernel", report=make_report(feedback="spills 12 regs"))
        s.log_exchange(run_id=rid, turn=1, candidate_index=0, provider="p", model="m", system="s",
                       messages=[{"role": "user", "content": "q"}], response="fewer registers please")
    runner = CliRunner()
    runs = runner.invoke(app, ["history", "runs", "--json"])
    assert runs.exit_code == 0 and json.loads(runs.stdout)[0]["id"] == rid
    found = runner.invoke(app, ["history", "search", "spills", "--json"])
    assert found.exit_code == 0 and [h["kind"] for h in json.loads(found.stdout)] == ["attempt"]
    assert runner.invoke(app, ["history", "search", "zebra"]).exit_code == 1
    logs = runner.invoke(app, ["history", "logs", rid[:6], "--json"])
    assert json.loads(logs.stdout)[0]["response"] == "fewer registers please"
    shown = runner.invoke(app, ["history", "show", json.loads(found.stdout)[0]["id"][:6], "--json"])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["source"] == "kernel"


def test_log_verify_records_the_cli_verification(store, tmp_path):
    folder = tmp_path / "gelu"
    folder.mkdir()
    (folder / "op.py").write_text(PROBLEM)
    (folder / "kernel.py").write_text("class ModelNew: ...\n")
    aid = B.log_verify(folder / "op.py", folder / "kernel.py", make_report("rejected", "mismatch"), store=store)
    row = store.attempt(aid)
    assert (row["problem"], row["source"], row["category"]) == ("gelu", "class ModelNew: ...\n", "mismatch")
    assert store.run(row["run_id"])["best_attempt_id"] is None
