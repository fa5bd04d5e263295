"""`kernelagent mcp` through the official MCP client over stdio: one server for the module, on the CPU.

The scenario runs once (verifies take seconds each on the CPU); each test checks one part of it: the tool
list, an honest and a cheating candidate (verified concurrently on one problem, sharing its pack),
progress notifications, history, guides, bench at other shapes, one-line errors, and a cancelled call
whose worker dies.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from kernelagent.problem import sha256_text
from tests.paths import REPO, SOFTMAX_PROBLEM, WRONG, softmax_case

TOOLS = {"verify", "audit", "bench", "profile", "library_search", "library_show", "history", "guide"}
CHEAT = WRONG / "dynamic" / "fallback_getattr.py"   # a copy kernel, then torch.softmax by a computed name
HANG = softmax_case("hang")


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def _worker_dirs(scratch: Path, candidate: Path) -> list[Path]:
    """Worker folders holding `candidate` (the verifier copies the candidate into its worker's folder)."""
    name = f"candidate_{sha256_text(candidate.read_text())[:12]}.py"
    # os.walk skips a folder removed while it is walked (a worker ending meanwhile); rglob raised
    # FileNotFoundError there and failed the whole module's set-up once in CI
    return [Path(root) for root, _, files in os.walk(scratch) if name in files]


async def _cancel_hang(client: Client, scratch: Path, out: dict[str, Any]) -> None:
    """Start a verify of a kernel that never returns; once its worker runs, cancel the call."""
    async def call() -> None:
        await client.call_tool("verify", {"problem": str(SOFTMAX_PROBLEM), "candidate_path": str(HANG),
                                          "seeds": 1, "timeout": 120})

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        deadline = time.monotonic() + 120
        while not _worker_dirs(scratch, HANG) and time.monotonic() < deadline:
            await anyio.sleep(0.2)
        out["hang_started"] = bool(_worker_dirs(scratch, HANG))
        await anyio.sleep(1.0)
        out["hang_running_before_cancel"] = bool(_worker_dirs(scratch, HANG))
        tg.cancel_scope.cancel()
    t0 = time.monotonic()
    while _worker_dirs(scratch, HANG) and time.monotonic() - t0 < 30:
        await anyio.sleep(0.2)
    out["hang_gone_after_s"] = None if _worker_dirs(scratch, HANG) else round(time.monotonic() - t0, 1)


async def _scenario(home: Path, scratch: Path) -> dict[str, Any]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "kernelagent.cli", "mcp", "--device", "cpu", "--workers", "1"],
        env={"KERNELAGENT_HOME": str(home), "KERNELAGENT_SCRATCH": str(scratch)}, cwd=str(REPO))
    out: dict[str, Any] = {"progress": []}

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        out["progress"].append(message)

    async def verify(key: str, **args: Any) -> None:
        out[key] = await client.call_tool("verify", {"problem": str(SOFTMAX_PROBLEM), "seeds": 1, **args},
                                          progress_callback=on_progress)

    async with Client(params) as client:
        out["tools"] = {t.name: t for t in (await client.list_tools()).tools}
        async with anyio.create_task_group() as tg:   # one problem, three candidates at once: one pack
            tg.start_soon(lambda: verify("honest", candidate_path=str(softmax_case("good"))))
            tg.start_soon(lambda: verify("wrong", candidate_path=str(softmax_case("mismatch_mask"))))
            tg.start_soon(lambda: verify("cheat", candidate_source=CHEAT.read_text()))
        out["history"] = await client.call_tool("history", {})
        aid = out["honest"].structured_content["attempt_id"]
        out["attempt"] = await client.call_tool("history", {"attempt_id": aid})
        out["guide"] = await client.call_tool("guide", {"name": "triton"})
        out["skill"] = await client.call_tool("guide", {"name": "skill"})
        out["show"] = await client.call_tool("library_show", {"name": "softmax"})
        out["bench"] = await client.call_tool("bench", {"library": "softmax", "shapes": [[4, 70]]})
        out["missing"] = await client.call_tool("verify", {"problem": "nope/op.py", "candidate_source": "x = 1"})
        out["both"] = await client.call_tool("verify", {"problem": str(SOFTMAX_PROBLEM), "candidate_source": "x",
                                                        "candidate_path": str(HANG)})
        out["profile_cpu"] = await client.call_tool("profile", {"problem": str(SOFTMAX_PROBLEM),
                                                                "candidate_path": str(HANG)})
        await _cancel_hang(client, scratch, out)
        out["after_cancel"] = await client.call_tool("library_search", {"query": "softmax"})
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict[str, Any]:
    home, scratch = tmp_path_factory.mktemp("mcphome"), tmp_path_factory.mktemp("mcpscratch")
    out = anyio.run(_scenario, home, scratch)
    out["home"] = home
    return out


def test_lists_every_tool_with_typed_inputs(run):
    assert set(run["tools"]) == TOOLS
    props = run["tools"]["verify"].input_schema["properties"]
    assert {"problem", "candidate_source", "candidate_path", "seeds", "timing"} <= set(props)
    assert props["seeds"]["type"] == "integer" and run["tools"]["verify"].input_schema["required"] == ["problem"]


def test_honest_candidate_is_accepted(run):
    res = run["honest"]
    assert not res.is_error, _text(res)
    doc = res.structured_content
    assert doc["report"]["verdict"] == "accepted" and doc["summary"].startswith("ACCEPTED")
    assert json.loads(_text(res))["report"]["category"] == "ok"   # the same JSON as text, for any client


def test_cheating_and_wrong_candidates_are_rejected(run):
    cheat = run["cheat"].structured_content["report"]
    assert cheat["verdict"] == "rejected"
    assert cheat["category"] in ("fallback_to_reference", "policy_violation"), cheat["message"]
    assert run["wrong"].structured_content["report"]["category"] == "mismatch"


def test_concurrent_verifies_shared_one_reference_pack(run):
    sha = sha256_text(SOFTMAX_PROBLEM.read_text())
    entries = [json.loads(p.read_text())["fields"] for p in (run["home"] / "cache" / "refs").glob("*/entry.json")]
    assert [f["seeds"] for f in entries if f["problem"] == sha] == [1]


def test_progress_notifications_name_the_stages(run):
    messages = " | ".join(m or "" for m in run["progress"])
    assert "running the candidate" in messages and "ACCEPTED" in messages


def test_history_lists_the_attempts_and_shows_one(run):
    attempts = run["history"].structured_content["attempts"]
    assert sorted(a["verdict"] for a in attempts) == ["accepted", "rejected", "rejected"]
    one = run["attempt"].structured_content["attempt"]
    assert one["source"] == softmax_case("good").read_text() and one["verdict"] == "accepted"
    assert one["feedback"]


def test_guides_and_library(run):
    assert _text(run["guide"]) == (REPO / "kernelagent" / "prompts" / "triton.md").read_text()
    assert "ModelNew" in _text(run["skill"]) and "caching_detected" in _text(run["skill"])
    shown = run["show"].structured_content
    assert shown["name"] == "softmax" and "@triton.jit" in shown["kernels"]["triton"]


def test_bench_times_a_library_kernel_at_other_shapes(run):
    res = run["bench"]
    assert not res.is_error, _text(res)
    doc = res.structured_content
    assert doc["verdict"] == "accepted" and doc["shapes"] == [[4, 70]], doc["summary"]
    assert doc["timing"] == {} and "CUDA GPU" in doc["note"]   # the CPU verifies, the GPU times


def test_user_errors_are_tool_errors_with_the_cli_line(run):
    assert run["missing"].is_error and _text(run["missing"]).endswith("problem file nope/op.py does not exist")
    assert run["both"].is_error and "exactly one of the two" in _text(run["both"])
    assert run["profile_cpu"].is_error and "needs a CUDA GPU" in _text(run["profile_cpu"])
    assert "Traceback" not in _text(run["missing"])


def test_cancelled_call_kills_its_worker_and_the_server_goes_on(run):
    assert run["hang_started"] and run["hang_running_before_cancel"]
    assert run["hang_gone_after_s"] is not None, "the hanging candidate's worker outlived the cancelled call"
    names = [e["name"] for e in run["after_cancel"].structured_content["entries"]]
    assert "softmax" in names


def test_a_client_that_goes_away_mid_reply_ends_the_server_quietly(tmp_path):
    """The editor closes the pipe while the server answers: exit 0, no traceback on stderr."""
    import os
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "kernelagent.cli", "mcp", "--device", "cpu", "--workers", "0"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
                            env={**os.environ, "KERNELAGENT_HOME": str(tmp_path)})
    proc.stdout.close()  # the client stops reading before the first reply
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "gone", "version": "0"}}}
    try:
        proc.stdin.write((json.dumps(hello) + "\n").encode())
        proc.stdin.flush()
    except BrokenPipeError:
        pass
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode == 0, err.decode()[-2000:]
    assert b"Traceback" not in err, err.decode()[-2000:]
