"""Loop behaviour through the replay provider: branches, restarts, retrieval, replies without code."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from kernelagent.agent import Deps, OptimizeConfig, RunInterrupted, optimize
from kernelagent.agent.providers.replay import ReplayProvider
from kernelagent.agent.replies import ReplyLog
from kernelagent.memory import open_store
from tests.fakes.agent_kit import kernel, reply
from tests.fakes.verify import COMPILER_ERROR, MISMATCH, fake_verify


class Recorder(ReplayProvider):
    """Replay that also keeps every (system, messages) it was sent."""

    def __init__(self, texts: list[str]):
        super().__init__([{"text": t, "input_tokens": 10, "output_tokens": 5} for t in texts])
        self.prompts: list[list[dict]] = []

    def complete(self, system, messages, *, max_tokens, hooks=None):
        self.prompts.append(messages)
        return super().complete(system, messages, max_tokens=max_tokens, hooks=hooks)


def _run(problem: Path, home: Path, texts: list[str], **cfg):
    provider, verified = Recorder(texts), []

    def verify(problem_path, candidate_path, options):
        verified.append(Path(candidate_path).read_text())
        return fake_verify(problem_path, candidate_path, options)

    prepare = cfg.pop("prepare_fn", None) or (lambda p: {})
    config = OptimizeConfig(**{"turns": 3, "candidates": 1, "beam": 1, **cfg})
    deps = Deps(provider=provider, verify_fn=verify, store=open_store(home), home=home, prepare_fn=prepare)
    return optimize(str(problem), config, deps), provider, verified


def _text(messages: list[dict]) -> str:
    return "\n".join(m["content"] for m in messages)


def test_each_branch_keeps_its_own_conversation(problem, home):
    a, b = kernel("mismatch", "branch-a"), kernel("compile_error", "branch-b")
    texts = [reply(a), reply(b), reply(kernel("ok speedup=1.2", "a2")), reply(kernel("ok speedup=1.1", "b2"))]
    result, provider, _ = _run(problem, home, texts, turns=2, candidates=2, beam=2)
    first, second = provider.prompts[2], provider.prompts[3]  # turn 2: best branch (mismatch) first
    assert "branch-a" in _text(first) and MISMATCH in _text(first)
    assert "branch-b" not in _text(first) and COMPILER_ERROR not in _text(first)
    assert "branch-b" in _text(second) and COMPILER_ERROR in _text(second) and "branch-a" not in _text(second)
    assert [m["role"] for m in first] == ["user", "assistant", "user"]
    assert result.status == "turns_exhausted" and result.best["speedup"] == 1.2


def test_a_branch_that_keeps_failing_restarts_from_the_first_prompt(problem, home):
    texts = [reply(kernel("compile_error", f"try {i}")) for i in range(3)]
    result, provider, _ = _run(problem, home, texts, turns=3, max_repairs=2)
    restart = provider.prompts[2]
    assert len(restart) == 1 and "Start again from the reference" in restart[0]["content"]
    assert "t2c0: 2 failed in a row, last compile_error" in restart[0]["content"]
    assert provider.prompts[0][0]["content"] in restart[0]["content"]
    assert result.status == "turns_exhausted" and result.best is None and result.out_path is None
    assert "no candidate was accepted" in Path(result.report_path).read_text()


def test_a_reply_without_code_is_not_verified_and_is_told_so(problem, home):
    texts = ["I think we should use shared memory.", reply(kernel("ok speedup=2"))]
    result, provider, verified = _run(problem, home, texts, target_speedup=1.5)
    assert len(verified) == 1 and result.status == "target_reached"
    assert "no complete ```python block" in provider.prompts[1][-1]["content"]
    assert [r["verdict"] for r in result.history] == ["none", "accepted"]


def test_an_identical_source_is_not_verified_twice(problem, home):
    same = kernel("mismatch")
    texts = [reply(same), reply(same, "Again."), reply(kernel("ok speedup=3"))]
    result, provider, verified = _run(problem, home, texts, target_speedup=2)
    assert verified.count(same) == 1 and len(verified) == 2
    assert "identical to t1c0" in provider.prompts[2][-1]["content"]
    store = open_store(home)
    assert len(store.attempts_for_run(result.run_id)) == 2


def test_prepare_and_memory_feed_the_first_prompt(problem, home, tmp_path):
    def prepare(path):
        return {"op_signature": ["aten.relu"], "text": "eager 1.000 ms; memory-bound floor 0.020 ms"}

    winner = kernel("ok speedup=4", "the earlier winner")
    _run(problem, home, [reply(winner)], target_speedup=2, prepare_fn=prepare)
    other = tmp_path / "relu6" / "op.py"
    other.parent.mkdir()
    other.write_text(problem.read_text().replace("torch.relu(x)", "torch.clamp(torch.relu(x), max=6.0)"))
    _, provider, _ = _run(other, home, [reply(kernel("ok speedup=2"))], target_speedup=1.5,
                          prepare_fn=prepare)
    opening = provider.prompts[0][0]["content"]
    assert "memory-bound floor 0.020 ms" in opening
    assert "the earlier winner" in opening and "4.00x over eager" in opening
    assert "torch.clamp(torch.relu(x), max=6.0)" in opening


def test_long_runs_are_not_cut_by_the_graph_recursion_limit(problem, home):
    texts = [reply(kernel("mismatch", f"try {i}")) for i in range(12)]
    result, provider, verified = _run(problem, home, texts, turns=12, max_repairs=99)
    assert result.status == "turns_exhausted" and result.turns == 12 and len(verified) == 12


def test_runs_without_a_store(problem, home):
    provider = Recorder([reply(kernel("ok speedup=2"))])
    deps = Deps(provider=provider, verify_fn=fake_verify, home=home)
    result = optimize(str(problem), OptimizeConfig(turns=2, candidates=1, target_speedup=1.5), deps)
    assert result.status == "target_reached" and Path(result.out_path).exists()


def test_ctrl_c_marks_the_run_interrupted_and_it_resumes(problem, home):
    class Interrupting(Recorder):
        """Sends the process a real SIGINT during its second call, then never answers it."""

        def complete(self, system, messages, *, max_tokens, hooks=None):
            if len(self.prompts) == 1 and not getattr(self, "interrupted", False):
                self.interrupted = True
                hooks.streamed("half a plan")
                os.kill(os.getpid(), signal.SIGINT)
                hooks.cancelled.wait(30)
                hooks.check()
            return super().complete(system, messages, max_tokens=max_tokens, hooks=hooks)

    provider = Interrupting([reply(kernel("mismatch")), reply(kernel("ok speedup=2"))])
    store = open_store(home)
    deps = Deps(provider=provider, verify_fn=fake_verify, store=store, home=home)
    with pytest.raises(RunInterrupted) as caught:
        optimize(str(problem), OptimizeConfig(turns=3, candidates=1, target_speedup=1.5), deps)
    run_id = caught.value.run_id
    assert store.run(run_id)["status"] == "interrupted" and len(store.attempts_for_run(run_id)) == 1
    kept = ReplyLog(home / "runs" / run_id).records()
    assert [r["status"] for r in kept] == ["complete", "cancelled"] and kept[1]["partials"] == ["half a plan"]
    result = optimize(None, None, deps, resume=run_id)
    assert result.status == "target_reached" and len(store.attempts_for_run(run_id)) == 2


def test_a_resumed_turn_reuses_the_replies_already_paid_for(problem, home):
    """Turn 1 asks twice; Ctrl-C lands during the second call. On resume only that call is made again."""

    class HalfTurn(Recorder):
        def complete(self, system, messages, *, max_tokens, hooks=None):
            if len(self.prompts) == 1 and not getattr(self, "interrupted", False):
                self.interrupted = messages
                os.kill(os.getpid(), signal.SIGINT)
                hooks.cancelled.wait(30)
                hooks.check()
            return super().complete(system, messages, max_tokens=max_tokens, hooks=hooks)

    provider = HalfTurn([reply(kernel("mismatch", "first")), reply(kernel("ok speedup=2", "second"))])
    store = open_store(home)
    deps = Deps(provider=provider, verify_fn=fake_verify, store=store, home=home)
    config = OptimizeConfig(turns=1, candidates=2, beam=1, target_speedup=1.5)
    with pytest.raises(RunInterrupted) as caught:
        optimize(str(problem), config, deps)
    result = optimize(None, None, deps, resume=caught.value.run_id)
    assert len(provider.prompts) == 2 and provider.prompts[1] == provider.interrupted  # only the cancelled call
    assert provider.prompts[0] != provider.prompts[1]  # two answers to one message are asked differently
    assert sorted(a["category"] for a in store.attempts_for_run(result.run_id)) == ["mismatch", "ok"]
    records = ReplyLog(home / "runs" / result.run_id).records()
    assert [r["status"] for r in records] == ["complete", "cancelled", "complete"]
    assert result.tokens["input"] == 20 and result.cost_usd == 0.0
