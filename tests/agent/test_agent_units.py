"""Pieces of the loop on their own: ranking, stop rules, history trimming, feedback text, live view."""

from __future__ import annotations

import io

from rich.console import Console

from kernelagent.agent.config import OptimizeConfig
from kernelagent.agent.feedback import FeedbackContext, candidate_feedback, standing, trim_history
from kernelagent.agent.progress import LiveView, ProgressState, render
from kernelagent.agent.scoring import score
from kernelagent.agent.select import best_of, better, choose, stop_reason
from kernelagent.agent.state import Branch


def _report(verdict="rejected", category="mismatch", speedup=None, device="cuda"):
    metrics = {"candidate_ms": 1 / speedup, "eager_ms": 1.0, "speedup_eager": speedup} if speedup else {}
    return {"verdict": verdict, "category": category, "message": f"{category} msg", "feedback": "FB",
            "metrics": metrics, "environment": {"device": device}}


def _branch(key, score, repairs=0, turn=1, attempt=None):
    return Branch(key=key, messages=[], attempt_id=attempt or key, turn=turn, score=list(score), repairs=repairs,
                  label="x")


def test_choose_ranks_by_score_then_recency_and_drops_dead_ends():
    pool = [_branch("old-fast", (3, 1.5), turn=1), _branch("new-fast", (3, 1.5), turn=2),
            _branch("faster", (3, 2.0)), _branch("miss", (1, 5)), _branch("stuck", (1, 5), repairs=5),
            _branch("dup", (3, 2.0), attempt="faster")]
    assert [b["key"] for b in choose(pool, 3, max_repairs=5)] == ["faster", "new-fast", "old-fast"]
    assert [b["key"] for b in choose(pool[3:5], 2, max_repairs=5)] == ["miss"]
    assert choose([_branch("stuck", (1, 5), repairs=5)], 2, max_repairs=5) == []


def test_an_unverified_kernel_ranks_as_a_miss_and_is_never_the_best():
    """Compiled, never run (no GPU): above the failures it can be told from, below any pass, never `best`."""
    unverified = _report("unverified", "compile_only", device="cpu")
    untimed_pass = _report("accepted", "ok", device="cpu")
    assert score(_report(category="compile_error")) < score(unverified) < score(untimed_pass)
    assert score(unverified)[0] == score(_report())[0] == 1
    cand = {"key": "t1c0", "turn": 1, "index": 0, "source": "x", "report": unverified}
    assert best_of([cand], None) is None and not better(cand, None)
    assert stop_reason(_state(), OptimizeConfig(turns=5), None, 0, [_cand(report=unverified)]) is None
    anchor = {"key": "t1c0", "turn": 1, "verdict": "unverified", "category": "compile_only", "source": "S"}
    assert standing(anchor) == "turn 1, compiled, not verified (no GPU)"


def _state(turn=2, cost=0.0, tokens=0, seconds=0.0):
    return {"turn": turn, "cost_usd": cost, "tokens": {"input": tokens, "output": 0}, "verify_seconds": seconds}


def _cand(cost=0.0, tokens=0, report=None):
    return {"cost_usd": cost, "tokens": {"input": tokens, "output": 0}, "report": report}


def test_stop_rules():
    cfg = OptimizeConfig(turns=5, target_speedup=2.0, budget_usd=1.0, budget_tokens=1000, patience=2)
    fast = {"report": _report("accepted", "ok", speedup=2.5)}
    slow = {"report": _report("accepted", "ok", speedup=1.2)}
    cpu = {"report": _report("accepted", "ok", device="cpu")}
    assert stop_reason(_state(), cfg, None, 0, [_cand()]) is None
    assert stop_reason(_state(), cfg, fast, 0, []) == "target_reached"
    assert stop_reason(_state(), cfg, cpu, 0, []) == "accepted_unmeasured"
    assert stop_reason(_state(turn=5), cfg, slow, 0, []) == "turns_exhausted"
    assert stop_reason(_state(), cfg, slow, 2, []) == "stagnated"
    assert stop_reason(_state(), cfg, None, 9, []) is None  # no stagnation before a first pass
    assert stop_reason(_state(), cfg, None, 0, [_cand()], budget_left=False) == "budget_exhausted"
    assert stop_reason(_state(), cfg, None, 0, [{**_cand(), "error": "budget"}]) == "budget_exhausted"
    broken = _cand(report=_report(category="internal_error"))
    assert stop_reason(_state(), cfg, None, 0, [broken, broken]) == "verifier_error"


def test_trim_history_keeps_the_first_message_and_the_last_pairs():
    msgs = [{"role": "user", "content": "PROBLEM"}]
    for t in range(1, 5):
        msgs += [{"role": "assistant", "content": f"code {t}"},
                 {"role": "user", "content": f"Turn {t}: verdict {t}\n\ndetails {t}"}]
    trimmed = trim_history(msgs, 2)
    assert [m["content"] for m in trimmed[::2]][:1] == ["PROBLEM"]
    assert [m["role"] for m in trimmed] == ["user", "assistant", "user", "assistant", "user"]
    assert [m["content"] for m in trimmed if m["role"] == "assistant"] == ["code 3", "code 4"]
    note = trimmed[2]["content"]
    assert "- Turn 1: verdict 1\n- Turn 2: verdict 2" in note and "details 1" not in note
    assert note.endswith("details 3") and trimmed[-1]["content"] == msgs[-1]["content"]
    assert trim_history(msgs[:5], 2) == msgs[:5]
    assert msgs[2]["content"] == "Turn 1: verdict 1\n\ndetails 1"  # the input is not modified


def _fc(best=None, target=None):
    return FeedbackContext(turns=5, best=best, target=target, max_tokens=900, labels={"/home/u/.ka/runs/r1": ""})


def test_feedback_names_the_candidate_and_what_to_build_on():
    base = {"key": "t2c1", "turn": 2, "reply": "x", "reused_from": None, "source": "S2"}
    report = {**_report(), "feedback": "File \"/home/u/.ka/runs/r1/t02_c1.py\", line 3\n\x1b[91mboom\x1b[0m"}
    rejected = candidate_feedback({**base, "report": report}, {"key": "t2c1", "turn": 2, "verdict": "rejected"},
                                  _fc())
    assert rejected.startswith("t2c1: the verifier rejected it — mismatch: mismatch msg")
    assert 'File "t02_c1.py", line 3\nboom' in rejected and "\x1b" not in rejected and "/home/u" not in rejected
    assert "Build on this file (t2c1)" in rejected and "3 turn(s) left" in rejected
    older = {"key": "t1c0", "turn": 1, "verdict": "accepted", "speedup": 1.5, "source": "OLDER FILE"}
    back = candidate_feedback({**base, "report": _report(category="policy_violation")}, older, _fc())
    assert "policy_violation" in back and "Build on t1c0 (turn 1, accepted, 1.50x over eager)" in back
    assert "did better than t2c1" in back and "OLDER FILE" in back
    best = {"key": "t1c0", "turn": 1, "report": _report("accepted", "ok", speedup=1.5)}
    ok = candidate_feedback({**base, "report": _report("accepted", "ok", speedup=1.25)},
                            {"key": "t2c1", "turn": 2, "verdict": "accepted"}, _fc(best, 2.0))
    assert "1.25x faster" in ok and "1.50x over eager (t1c0)" in ok and "target is 2.00x" in ok
    assert "Make it faster" in ok


def test_feedback_reports_truncation_blocks_and_duplicates_every_time():
    base = {"key": "t3c0", "turn": 3, "reply": "x", "source": None}
    cut = candidate_feedback({**base, "report": None, "truncated": True}, None, _fc())
    assert "t3c0: your reply was cut off at the output limit (900 tokens)" in cut
    found = {**base, "source": "S", "report": _report(), "hit_limit": True, "blocks": 2, "chosen": 2,
             "reused_from": "t1c0"}
    text = candidate_feedback(found, None, _fc())
    assert "reached the output limit of 900 tokens" in text
    assert "held 2 python blocks" in text and "block 2, the last one" in text
    assert "identical to t1c0" in text and text.startswith("t3c0:")


def _events():
    return [{"event": "start", "run_id": "r1", "model": "m", "turns": 5, "budget_usd": 2.0},
            {"event": "turn", "turn": 2, "turns": 5},
            {"event": "stage", "stage": "turn 2: verifying 2 candidate(s)"},
            {"event": "stream", "turn": 2, "index": 0, "chars": 60},
            {"event": "stream", "turn": 2, "index": 1, "chars": 40},
            {"event": "retry", "turn": 2, "index": 1, "reason": "HTTP 529", "wait": 2.0},
            {"event": "proposed", "turn": 2, "index": 0, "ok": True},
            {"event": "verified", "turn": 2, "index": 0, "verdict": "accepted", "category": "ok",
             "message": "fine", "speedup": 1.7, "candidate_ms": 0.59},
            {"event": "verified", "turn": 2, "index": 1, "verdict": "rejected", "category": "compile_error",
             "message": "boom"},
            {"event": "selected", "best_speedup": 1.7, "accepted": True, "tokens": {"input": 1200, "output": 300},
             "cost_usd": 0.0123, "stop": None}]


def test_progress_view_shows_turn_verdicts_best_tokens_and_cost():
    state = ProgressState()
    for e in _events():
        state.update(e)
    console = Console(file=io.StringIO(), width=160, record=True)
    console.print(render(state))
    text = console.export_text()
    for needle in ("turn 2/5", "best 1.70x", "1200 in / 300 out", "$0.012 of $2.00", "compile_error", "0.59",
                   "accepted", "boom", "verifying", "~25 tokens streamed", "retries 1", "HTTP 529", "0:0"):
        assert needle in text


def test_live_view_is_a_progress_callback():
    seen = []
    out = io.StringIO()
    with LiveView(Console(file=out, width=160, force_terminal=False), on_event=seen.append) as view:
        for e in _events():
            view(e)
    assert len(seen) == len(_events()) and "best 1.70x" in out.getvalue()
    assert out.getvalue().endswith("\n")  # the next line printed after the view starts on a line of its own


def test_system_prompt_adds_the_backend_guide_when_installed(monkeypatch):
    from kernelagent.agent import prompts

    real = prompts._read
    monkeypatch.setattr(prompts, "_read", lambda name: "CUTE GUIDE" if name == "cute_dsl.md" else real(name))
    cute, triton = prompts.system_blocks("cute"), prompts.system_blocks("triton")
    assert [b.text for b in cute[1:]] == ["CUTE GUIDE"] and all(b.cache for b in cute)
    assert "CuTe DSL" in cute[0].text and "Triton" in triton[0].text
    assert len(triton) == 1 + (real("triton.md") is not None)
