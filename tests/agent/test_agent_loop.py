"""The whole loop against fake LLM servers (real Anthropic SDK / httpx) and a fake verifier."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelagent.agent import Deps, OptimizeConfig, optimize
from kernelagent.agent.errors import RunFailed
from kernelagent.agent.providers.prices import Price, cost_usd
from kernelagent.memory import open_store
from tests.fakes.agent_kit import LLMS, kernel, reply
from tests.fakes.verify import COMPILER_ERROR, MISMATCH, fake_verify


def run(problem: Path, provider, home: Path, **cfg) -> tuple:
    store = open_store(home)
    events: list[dict] = []
    config = OptimizeConfig(**{"turns": 5, "candidates": 1, "beam": 1, **cfg})
    deps = Deps(provider=provider, verify_fn=fake_verify, store=store, home=home)
    return optimize(str(problem), config, deps, progress=events.append), store, events


def test_three_turns_feedback_reaches_the_model(llm, problem, home, monkeypatch):
    good = kernel("ok speedup=1.7")
    script = [reply(kernel("compile_error")), reply(kernel("mismatch")), reply(good)]
    with llm.server_cls(script) as server:
        result, store, events = run(problem, llm.provider(server.url, monkeypatch), home, target_speedup=1.5)
    bodies = server.requests
    assert len(bodies) == 3
    turn2, turn3 = (llm.fakes.last_user_text(b) for b in bodies[1:])
    assert "CompilationError" in turn2 and "are not compatible for matmul" in turn2
    assert "compile_error" in turn2
    assert "max abs error 0.25 at [7, 511]" in turn3 and "mismatch" in turn3
    assert MISMATCH in llm.fakes.prompt_of(bodies[2]) and COMPILER_ERROR not in turn3
    assert "def forward(self, x):  # mismatch" in llm.fakes.prompt_of(bodies[2])  # its own last reply
    assert result.status == "target_reached" and result.turns == 3
    assert Path(result.out_path).read_text() == good
    assert Path(result.out_path) == problem.with_name("op_triton.py")
    per_call = cost_usd(llm.model, input_tokens=100, output_tokens=50)
    assert result.tokens["input"] == 300 and result.tokens["output"] == 150
    assert result.cost_usd == pytest.approx(3 * per_call) and per_call > 0
    attempts = store.attempts_for_run(result.run_id)
    assert [a["category"] for a in attempts] == ["compile_error", "mismatch", "ok"]
    assert [a["tokens"] for a in attempts] == [150, 150, 150]
    assert sum(a["cost_usd"] for a in attempts) == pytest.approx(result.cost_usd)
    assert attempts[1]["parent_id"] == attempts[0]["id"] and attempts[2]["parent_id"] == attempts[1]["id"]
    row = store.run(result.run_id)
    assert row["status"] == "target_reached" and row["tokens_in"] == 300 and row["finished"]
    assert row["best_attempt_id"] == attempts[2]["id"] and row["cost_usd"] == pytest.approx(result.cost_usd)
    report = Path(result.report_path).read_text()
    assert "compile_error" in report and "mismatch" in report and "1.70x" in report
    assert {"start", "turn", "proposed", "verified", "selected", "done"} <= {e["event"] for e in events}


def test_budget_is_kept_before_spending(llm, problem, home, monkeypatch):
    """Output at $1000 per Mtok, input free: each call's worst case is exactly 100 tokens = $0.10, and costs
    $0.05 (50 tokens). With $0.25, calls 1-4 fit (the 4th exactly: 0.15 spent + 0.10); the 5th would not."""
    script = [reply(kernel("mismatch", f"try {i}")) for i in range(6)]
    with llm.server_cls(script) as server:
        provider = llm.provider(server.url, monkeypatch)
        store = open_store(home)
        deps = Deps(provider=provider, verify_fn=fake_verify, store=store, home=home,
                    price=Price(0.0, 1000.0, 0.0, 0.0))
        config = OptimizeConfig(turns=6, candidates=1, beam=1, budget_usd=0.25, max_output_tokens=100, max_repairs=9)
        result = optimize(str(problem), config, deps)
    assert result.status == "budget_exhausted" and len(server.requests) == 4 and result.turns == 4
    assert result.cost_usd == pytest.approx(0.20) and result.cost_usd <= 0.25
    assert store.run(result.run_id)["status"] == "budget_exhausted"


def test_cpu_mode_stops_at_first_accepted(problem, home, monkeypatch):
    llm = LLMS[0]
    script = [reply(kernel("compile_error")), reply(kernel("ok")), reply(kernel("ok speedup=3"))]
    with llm.server_cls(script) as server:
        result, _, _ = run(problem, llm.provider(server.url, monkeypatch), home)
    assert result.status == "accepted_unmeasured" and not result.speed_measured
    assert result.turns == 2 and len(server.requests) == 2
    assert "# FAKE: ok\n" in Path(result.out_path).read_text()
    assert "Speed was not measured" in Path(result.report_path).read_text()
    assert result.to_dict()["accepted"] is True


def test_provider_failure_is_resumable(problem, home, monkeypatch):
    llm = LLMS[0]
    with llm.server_cls([], failures=[500] * 4) as server:  # one call: the first try and 3 retries
        provider = llm.provider(server.url, monkeypatch)
        with pytest.raises(RunFailed) as caught:
            run(problem, provider, home, target_speedup=1.5)
        run_id = caught.value.run_id
        assert f"--resume {run_id}" in str(caught.value) and len(server.requests) == 4
        store = open_store(home)
        row = store.run(run_id)
        assert row["status"] == "failed" and store.attempts_for_run(run_id) == []
        assert row["config"]["resume"] == f"kernelagent optimize --resume {run_id}"
        server.extend([reply(kernel("mismatch")), reply(kernel("ok speedup=2"))])
        deps = Deps(provider=provider, verify_fn=fake_verify, store=store, home=home)
        result = optimize(None, None, deps, resume=run_id)  # settings come from the checkpoint
    assert result.run_id == run_id and result.status == "target_reached" and result.turns == 2
    assert [a["category"] for a in store.attempts_for_run(run_id)] == ["mismatch", "ok"]
    again = optimize(None, None, deps, resume=run_id)  # a finished run just reports itself
    assert again.status == "target_reached" and again.best["attempt_id"] == result.best["attempt_id"]


def test_a_spent_gpu_budget_verifies_nothing_more(problem, home, monkeypatch):
    llm = LLMS[0]
    with llm.server_cls([reply(kernel("ok speedup=2"))]) as server:
        result, store, _ = run(problem, llm.provider(server.url, monkeypatch), home, budget_gpu_s=0.0)
    assert result.status == "budget_exhausted" and len(server.requests) == 1 and result.turns == 1
    assert store.attempts_for_run(result.run_id) == [] and result.history[0]["category"] == "budget"


def test_a_kernel_compiled_without_a_gpu_is_never_taken_for_accepted(problem, home, monkeypatch):
    """CuTe DSL on CPU: each candidate compiles and is never run (verdict unverified). The loop goes on (no
    `accepted_unmeasured` stop, no restart as if repairs had failed), the model hears that nothing checked its
    outputs, and the run ends with no accepted kernel and none written."""
    llm = LLMS[0]
    script = [reply(kernel("compile_only", f"try {i}")) for i in range(3)]
    with llm.server_cls(script) as server:
        result, store, events = run(problem, llm.provider(server.url, monkeypatch), home, turns=3, max_repairs=2)
    assert len(server.requests) == 3 and result.turns == 3 and result.status == "turns_exhausted"
    assert not result.accepted and result.unverified and result.best is None and result.out_path is None
    assert result.to_dict()["accepted"] is False and result.to_dict()["unverified"] is True
    second, third = (llm.fakes.last_user_text(b) for b in server.requests[1:])
    for text in (second, third):
        assert "compiled, but NOT verified" in text and "COMPILED, NOT VERIFIED (no GPU)" in text
        assert "nothing has checked what it computes" in text
        assert "accepted it" not in text and "Several repairs" not in text
    attempts = store.attempts_for_run(result.run_id)
    assert [(a["verdict"], a["category"]) for a in attempts] == [("unverified", "compile_only")] * 3
    assert store.run(result.run_id)["best_attempt_id"] is None
    assert not any(e.get("accepted") for e in events if e["event"] in ("selected", "done"))
    md = Path(result.report_path).read_text()
    assert "0 accepted, 3 compiled but not run (no GPU)" in md and "**Not verified**" in md
