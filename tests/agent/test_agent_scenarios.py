"""`kernelagent optimize` against scripted stand-in servers: each scenario asserts the exit code, the stored
rows and the exact requests the server received. The real command line, provider, SDK, loop and store run
in-process; only the verifier is the fake one (tests/fakes/verify.py) and the retry numbers are fast.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelagent.agent import providers
from kernelagent.agent.providers.base import RetryPolicy
from kernelagent.agent.replies import ReplyLog
from kernelagent.cli.app import app
from kernelagent.memory import open_store
from kernelagent.tools import optimize as tools_optimize
from tests.fakes import anthropic_server, openai_server
from tests.fakes.agent_kit import FAST_RETRY, fake_deps, kernel, reply
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.verify import CUTE_ERROR, MISMATCH, POLICY

MODEL = "claude-sonnet-5-5"


@pytest.fixture
def cli(home, monkeypatch):
    """Run `kernelagent ARGS` in-process with the fake verifier; `retry` sets the providers' retry numbers."""
    monkeypatch.setattr(tools_optimize, "agent_deps", fake_deps)
    real = providers.make_provider

    def run(*args: str, url: str | None = None, kind: str = "anthropic", retry: RetryPolicy = FAST_RETRY):
        monkeypatch.setattr(providers, "make_provider", lambda *a, **k: real(*a, **{"retry": retry, **k}))
        if url and kind == "anthropic":
            monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
            monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy-key")
        elif url:
            monkeypatch.setenv("OPENAI_BASE_URL", url + "/v1")
        return CliRunner().invoke(app, list(args))

    return run


def _store_rows(home: Path) -> tuple[dict, list[dict]]:
    with open_store(home) as store:
        runs = store.runs()
        assert len(runs) == 1, runs
        return runs[0], store.attempts_for_run(runs[0]["id"])


def _replies(home: Path, run_id: str) -> list[dict]:
    return ReplyLog(home / "runs" / run_id).records()


def _last_user(body: dict) -> str:
    if "system" in body or isinstance(body["messages"][-1]["content"], list):
        return anthropic_server.last_user_text(body)
    return openai_server.last_user_text(body)


GOOD = reply(kernel("ok speedup=2"))
BROKEN = {"stall": {"stall": 5.0, "after_chunks": 1}, "drop": {"drop": True, "after_chunks": 1},
          "malformed": {"malformed": True}, "empty": {"empty": True}}


@pytest.mark.parametrize("how", sorted(BROKEN))
def test_a_broken_stream_is_retried_and_the_run_goes_on(cli, problem, home, how):
    broken = {**BROKEN[how], "text": reply(kernel("mismatch", "the paid half"))}
    with FakeAnthropic([broken, GOOD]) as fake:
        res = cli("optimize", str(problem), "--turns", "2", "--candidates", "1", "--target-speedup", "1.5",
                  "--json", url=fake.url)
    assert res.exit_code == 0, res.stderr
    assert len(fake.requests) == 2 and fake.requests[0] == fake.requests[1]  # the unanswered request, again
    run, attempts = _store_rows(home)
    assert run["status"] == "target_reached" and [a["category"] for a in attempts] == ["ok"]
    [record] = _replies(home, run["id"])
    assert record["status"] == "complete" and record["retries"] == 1
    if how in ("stall", "drop"):
        assert "the paid half" in "".join(record["partials"]) or record["partials"][0] in broken["text"]
        assert record["estimated"] and record["cost_usd"] > json.loads(res.stdout)["cost_usd"] - record["cost_usd"]


def test_a_provider_that_keeps_failing_marks_the_run_failed_and_it_resumes(cli, problem, home):
    drop = {"drop": True, "after_chunks": 1, "text": "a long plan that never ends " * 3}
    with FakeAnthropic([drop] * FAST_RETRY.stream_attempts) as fake:
        res = cli("optimize", str(problem), "--turns", "2", "--candidates", "1", "--target-speedup", "1.5",
                  "--json", url=fake.url)
        assert res.exit_code == 3 and "Traceback" not in res.stderr + res.stdout
        run, attempts = _store_rows(home)
        assert f"--resume {run['id']}" in res.stderr and run["status"] == "failed" and attempts == []
        assert run["config"]["resume"] == f"kernelagent optimize --resume {run['id']}"
        [failed] = _replies(home, run["id"])
        assert failed["status"] == "failed" and len(failed["partials"]) == 3 and failed["cost_usd"] > 0
        assert len(fake.requests) == 3
        fake.extend([GOOD])
        again = cli("optimize", "--resume", run["id"], "--json", url=fake.url)
    assert again.exit_code == 0, again.stderr
    run, attempts = _store_rows(home)
    assert run["status"] == "target_reached" and [a["category"] for a in attempts] == ["ok"]
    assert len(fake.requests) == 4 and fake.requests[3] == fake.requests[0]
    assert run["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in _replies(home, run["id"])))
    with open_store(home) as store:
        if hasattr(store, "exchanges"):  # the memory store's LLM log, where this tree has it
            calls = store.exchanges(run["id"])[::-1]  # oldest first
            assert [bool(e["error"]) for e in calls] == [True, False]
            assert calls[0]["response"].startswith("a long plan") and calls[1]["prompt"].startswith("Write a")


def test_a_529_storm_and_a_429_with_retry_after(cli, problem, home):
    storm = RetryPolicy(attempts=30, initial_wait=0.001, max_wait=0.01, stall_timeout=2.0)
    with FakeAnthropic([GOOD], failures=[529] * 25) as fake:
        fake.failures.append({"fail": 429, "retry_after": "0.02"})
        res = cli("optimize", str(problem), "--turns", "1", "--candidates", "1", url=fake.url, retry=storm)
    assert res.exit_code == 0, res.stderr
    assert len(fake.requests) == 27 and all(r == fake.requests[0] for r in fake.requests)
    run, _ = _store_rows(home)
    assert run["status"] == "target_reached" or run["status"] == "turns_exhausted"
    assert "retries 26" in res.stderr and res.stderr.endswith("\n")  # the live view counted them


def test_truncation_is_reported_every_time(cli, problem, home):
    cut = {"text": "Plan.\n\n```python\nclass ModelNew(", "stop_reason": "max_tokens"}
    cut_after = {"text": reply(kernel("mismatch")) + "\nAnd now a long explanation", "stop_reason": "max_tokens"}
    with FakeAnthropic([cut, cut_after, GOOD]) as fake:
        res = cli("optimize", str(problem), "--turns", "3", "--candidates", "1", "--target-speedup", "1.5",
                  "--max-output-tokens", "700", "--json", url=fake.url)
    assert res.exit_code == 0, res.stderr
    turn2, turn3 = (_last_user(b) for b in fake.requests[1:])
    assert turn2.startswith("t1c0: your reply was cut off at the output limit (700 tokens)")
    assert turn3.startswith("t2c0: the verifier rejected it — mismatch") and MISMATCH in turn3
    assert "reached the output limit of 700 tokens" in turn3
    assert [b["max_tokens"] for b in fake.requests] == [700] * 3
    _, attempts = _store_rows(home)
    assert [a["category"] for a in attempts] == ["mismatch", "ok"]


def test_policy_violation_after_mismatch_is_heard_and_the_better_file_is_built_on(cli, problem, home):
    miss, bad = kernel("mismatch", "close one"), kernel("policy_violation", "cheat")
    two_blocks = reply(kernel("compile_error", "draft")) + "\n" + reply(kernel("cute_error", "final one"))
    with FakeAnthropic([reply(miss), reply(bad), two_blocks, GOOD]) as fake:
        res = cli("optimize", str(problem), "--turns", "4", "--candidates", "1", "--target-speedup", "1.5",
                  "--json", url=fake.url)
    assert res.exit_code == 0, res.stderr
    bodies = fake.requests
    assert len(bodies) == 4 and len({json.dumps(b, sort_keys=True) for b in bodies}) == 4  # never the same twice
    turn3, turn4 = _last_user(bodies[2]), _last_user(bodies[3])
    assert turn3.startswith("t2c0: the verifier rejected it — policy_violation") and POLICY in turn3
    assert "Build on t1c0 (turn 1, rejected: mismatch), which did better than t2c0" in turn3
    assert "forward(self, x):  # close one" in turn3
    assert "held 2 python blocks defining `ModelNew`; the verifier checked block 2, the last one" in turn4
    assert turn4.count(CUTE_ERROR.splitlines()[0]) == 1 and "\x1b" not in json.dumps(bodies)  # plain, once
    run, attempts = _store_rows(home)
    assert [a["category"] for a in attempts] == ["mismatch", "policy_violation", "compile_error", "ok"]
    assert attempts[1]["parent_id"] == attempts[0]["id"] and attempts[2]["parent_id"] == attempts[0]["id"]


def test_no_local_path_reaches_the_provider(cli, problem, home):
    with FakeAnthropic([reply(kernel("traceback")), GOOD]) as fake:
        res = cli("optimize", str(problem), "--turns", "2", "--candidates", "1", "--target-speedup", "1.5",
                  "--json", url=fake.url)
    assert res.exit_code == 0, res.stderr
    sent = json.dumps(fake.requests)
    assert 'File \\"t01_c0.py\\", line 9' in sent
    for local in (str(home), str(problem.parent), str(Path.home())):
        assert local not in sent


def test_the_budget_is_kept_before_spending_with_a_given_price(cli, problem, home):
    """An unpriced local model: refused without a price; with output at $1000/Mtok and 100 tokens per call,
    each call may cost $0.10 and costs $0.05, so $0.25 allows four calls (the fourth exactly) and no fifth."""
    script = [reply(kernel("mismatch", f"try {i}")) for i in range(6)]
    with FakeOpenAI(script) as fake:
        args = ["optimize", str(problem), "--provider", "openai", "--model", "fake-coder", "--turns", "6",
                "--candidates", "1", "--max-output-tokens", "100", "--budget-usd", "0.25"]
        refused = cli(*args, url=fake.url, kind="openai")
        assert refused.exit_code == 2 and "--price-in" in refused.stderr and fake.requests == []
        assert not (home / "kernelagent.db").exists() or open_store(home).runs() == []
        res = cli(*args, "--price-in", "0", "--price-out", "1000", "--json", url=fake.url, kind="openai")
    assert res.exit_code == 1, res.stderr
    doc = json.loads(res.stdout)
    assert doc["status"] == "budget_exhausted" and len(fake.requests) == 4
    assert doc["cost_usd"] == pytest.approx(0.20) and [b["max_tokens"] for b in fake.requests] == [100] * 4
    run, attempts = _store_rows(home)
    assert run["status"] == "budget_exhausted" and len(attempts) == 4 and run["cost_usd"] == pytest.approx(0.20)


def test_setup_mistakes_exit_2_before_any_paid_call(cli, problem, home, monkeypatch):
    with FakeAnthropic([GOOD]) as fake:
        unknown = cli("optimize", str(problem), "--model", "claude-bogus-1", url=fake.url)
        assert unknown.exit_code == 2 and "claude-sonnet-5-5, claude-opus-5-5" in unknown.stderr
        thinking = cli("optimize", str(problem), "--provider", "openai", "--thinking-budget", "2048", url=fake.url)
        assert thinking.exit_code == 2 and "anthropic provider only" in thinking.stderr
        real_find = importlib.util.find_spec
        monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "cutlass" else real_find(name))
        cute = cli("optimize", str(problem), "--backend", "cute", url=fake.url)
        assert cute.exit_code == 2 and "kernelagent[cute]" in cute.stderr
        for bad in (["--turns", "-1"], ["--candidates", "0"], ["--provider", "bogus"]):
            refused = cli("optimize", str(problem), *bad, url=fake.url)
            assert refused.exit_code == 2, bad
    assert fake.requests == [] and "Traceback" not in unknown.stderr + cute.stderr


def test_a_named_provider_that_is_not_configured_is_an_error_not_the_offline_search(cli, problem, home):
    res = cli("optimize", str(problem), "--provider", "openai")
    assert res.exit_code == 2 and "needs a server" in res.stderr and "offline" not in res.stdout


def test_the_backend_is_passed_to_the_verifier(cli, problem, home):
    with FakeAnthropic([reply(kernel("ok lang=cute")), reply(kernel("ok speedup=2"))]) as fake:
        res = cli("optimize", str(problem), "--turns", "2", "--candidates", "1", "--target-speedup", "1.5",
                  "--json", url=fake.url)
    assert res.exit_code == 0, res.stderr
    assert "the candidate uses cute; write it in triton" in _last_user(fake.requests[1])
    _, attempts = _store_rows(home)
    assert [a["category"] for a in attempts] == ["policy_violation", "ok"]


def test_thinking_budget_reaches_the_api(cli, problem, home):
    with FakeAnthropic([GOOD]) as fake:
        res = cli("optimize", str(problem), "--turns", "1", "--candidates", "1", "--thinking-budget", "2048",
                  "--max-output-tokens", "1000", "--json", url=fake.url)
    assert res.exit_code == 0, res.stderr
    assert fake.requests[0]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert fake.requests[0]["max_tokens"] == 3048


def test_a_run_that_only_compiled_exits_4_not_0(cli, problem, home):
    """Without a GPU a CuTe DSL kernel compiles and is never run: the run accepts nothing and says so with
    exit 4 (compiled but not verified), not 0 (accepted) nor 1 (rejected); no kernel file is written."""
    with FakeAnthropic([reply(kernel("compile_only lang=cute"))]) as fake:
        res = cli("optimize", str(problem), "--backend", "cute", "--turns", "1", "--candidates", "1", "--json",
                  url=fake.url)
    assert res.exit_code == 4, res.stderr
    doc = json.loads(res.stdout)
    assert doc["accepted"] is False and doc["unverified"] is True and doc["out_path"] is None
    run, attempts = _store_rows(home)
    assert run["best_attempt_id"] is None and [a["verdict"] for a in attempts] == ["unverified"]
