"""A run of the real `kernelagent optimize` killed with SIGKILL in the middle of verification resumes without
losing or repeating work (the fake verifier is plugged in by tests/fakes/cli_main.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelagent.agent.replies import ReplyLog
from kernelagent.memory import open_store
from tests.fakes.agent_kit import ENV_VARS, LLMS, ROOT, kernel, reply

SLEEPER = kernel("compile_error sleep=60")
SCRIPT = [reply(kernel("mismatch")), reply(SLEEPER),                      # turn 1; the 2nd hangs in verify
          reply(kernel("ok speedup=1.5")), reply(kernel("ok speedup=2"))]  # turn 2


def _env(llm, url: str, home: Path, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env.update(llm.env(url), KERNELAGENT_HOME=str(home), PYTHONPATH=str(ROOT), FAST_RETRY="1",
               HOME=str(tmp / "user"),
               FAKE_VERIFY_SLEEP_MARKER=str(tmp / "sleeping"), FAKE_VERIFY_LOG=str(tmp / "verified.log"))
    return env


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "tests.fakes.cli_main", "optimize", *args, "--json"]


def _wait(predicate, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out waiting for the run"
        time.sleep(0.05)


def _attempts(home: Path) -> list[dict]:
    if not (home / "kernelagent.db").exists():
        return []
    with open_store(home) as store:
        runs = store.runs()
        return store.attempts_for_run(runs[0]["id"]) if runs else []


@pytest.mark.slow
@pytest.mark.parametrize("llm", [LLMS[0], LLMS[2]], indirect=True, ids=["anthropic", "openai"])
def test_kill_9_then_resume(llm, problem, home, tmp_path):
    with llm.server_cls(SCRIPT) as server:
        env = _env(llm, server.url, home, tmp_path)
        first = subprocess.Popen(_cmd(str(problem), "--provider", llm.kind, "--model", llm.model,
                                      "--turns", "2", "--candidates", "2", "--beam", "1",
                                      "--verify-workers", "2"),
                                 cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            _wait(lambda: (tmp_path / "sleeping").exists() and len(_attempts(home)) == 1
                  or first.poll() is not None)
            assert first.poll() is None, first.communicate()[1].decode()[-2000:]
        finally:
            os.kill(first.pid, signal.SIGKILL)
            first.wait()
        with open_store(home) as store:
            run = store.runs()[0]
            assert run["status"] == "running" and len(store.attempts_for_run(run["id"])) == 1
        resumed = subprocess.run(_cmd("--resume", run["id"]), cwd=ROOT, env=env, capture_output=True,
                                 timeout=180)
        assert resumed.returncode == 0, resumed.stderr.decode()[-2000:]
        assert len(server.requests) == 4  # turn 1 was not asked again
    result = json.loads(resumed.stdout)
    assert result["run_id"] == run["id"] and result["status"] == "turns_exhausted"
    assert result["best"]["speedup"] == 2.0 and "speedup=2" in Path(result["out_path"]).read_text()
    with open_store(home) as store:
        attempts = store.attempts_for_run(run["id"])
        assert store.run(run["id"])["status"] == "turns_exhausted"
    shas = [a["source_sha"] for a in attempts]
    assert len(attempts) == 4 and len(set(shas)) == 4
    assert sorted(a["category"] for a in attempts) == ["compile_error", "mismatch", "ok", "ok"]
    finished = (tmp_path / "verified.log").read_text().split()
    assert sorted(finished) == sorted(shas)  # every verification that finished did so exactly once
    assert [a["turn"] for a in attempts] == [1, 1, 2, 2]


@pytest.mark.slow
def test_ctrl_c_mid_generation_exits_at_once_and_keeps_what_arrived(problem, home, tmp_path):
    llm = LLMS[0]
    hold = {"text": reply(kernel("mismatch", "half way there")), "hold": 300, "after_chunks": 1}
    with llm.server_cls([hold]) as server:
        env = {k: v for k, v in _env(llm, server.url, home, tmp_path).items() if k != "FAST_RETRY"}  # no stall limit
        args = (str(problem), "--provider", "anthropic", "--model", llm.model, "--turns", "2", "--candidates", "1",
                "--target-speedup", "1.5")
        proc = subprocess.Popen(_cmd(*args), cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert server.streaming.wait(180), "the call never started"
            time.sleep(3.0)  # let the first chunk reach the client (generous: CI machines are loaded)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)  # the server holds the reply for 300 s: only a cancel ends it
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 130, (proc.returncode, err.decode()[-3000:])
        with open_store(home) as store:
            run = store.runs()[0]
            assert run["status"] == "interrupted" and store.attempts_for_run(run["id"]) == []
        assert f"--resume {run['id']}" in err.decode() and "Traceback" not in err.decode()
        [kept] = ReplyLog(home / "runs" / run["id"]).records()
        assert kept["status"] == "cancelled" and kept["partials"] and kept["partials"][0] in hold["text"]
        assert len(server.requests) == 1  # resuming is tested in-process (test_agent_graph) and after kill -9 above
