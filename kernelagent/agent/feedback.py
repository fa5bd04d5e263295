"""The user messages of the loop: the first prompt, each candidate's feedback, and history trimming.

All wording lives in `kernelagent/prompts/{problem,feedback}.md`; this module only picks sections and
fills them. Every piece of feedback opens with its candidate's label (t2c1) and ends by saying which
file the next attempt builds on. A branch keeps its first message and its last few (reply, feedback)
pairs verbatim; older pairs shrink to the first line of their feedback, so the context stays bounded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kernelagent.agent.prompts import BACKEND_NAMES, render
from kernelagent.agent.scoring import accepted, metric, speed_measured, unverified
from kernelagent.agent.summarise import fit
from kernelagent.agent.text import plain

FEEDBACK, PROBLEM = "feedback.md", "problem.md"
EXAMPLE_CHARS = 6000  # an example longer than this is shortened by function; two stay well under 4k tokens


def _times(x: float | None) -> str:
    return f"{x:.2f}x" if x is not None else "?"


# -- the first prompt ---------------------------------------------------------------------------------------

def first_prompt(problem: dict[str, Any], backend: str, prepared: dict[str, Any],
                 examples: list[dict[str, Any]], lessons: list[str], labels: Mapping[str, str] | None = None) -> str:
    """The opening user message: the reference, what the verifier will check, similar kernels, lessons."""
    parts = {"context": "", "examples": "", "lessons": ""}
    text = prepared.get("text") or _describe(prepared)
    if text:
        parts["context"] = "\n\n" + render(PROBLEM, "context", text=plain(text, labels))
    items = [x for x in (example_text(e, backend) for e in examples) if x]
    if items:
        parts["examples"] = "\n\n" + render(PROBLEM, "examples", items="\n\n".join(items))
    if lessons:
        parts["lessons"] = "\n\n" + render(PROBLEM, "lessons", items="\n".join(f"- {plain(x)}" for x in lessons))
    return render(PROBLEM, name=problem["name"], backend=BACKEND_NAMES.get(backend, backend),
                  source=problem["source"].strip("\n"), **parts) + "\n"


def example_label(e: dict[str, Any], backend: str) -> str:
    """`Triton, 1.70x over eager on H200`, or just the backend when no speed was measured."""
    name = BACKEND_NAMES.get(e.get("backend") or backend, e.get("backend") or backend)
    speed = e.get("speedup")
    if not isinstance(speed, int | float) or isinstance(speed, bool):
        return name
    return f"{name}, {speed:.2f}x over eager" + (f" on {e['gpu']}" if e.get("gpu") else "")


def example_text(e: dict[str, Any], backend: str) -> str | None:
    """One example, whole or shortened by function; None when even the summary would not fit."""
    fitted = fit(e.get("source") or "", EXAMPLE_CHARS)
    if fitted is None:
        return None
    source, short = fitted
    return render(PROBLEM, "example_short" if short else "example", name=e.get("problem") or e.get("name", "?"),
                  label=example_label(e, backend), source=source.strip("\n"))


def _describe(prepared: dict[str, Any]) -> str:
    """`key: value` lines of the baseline and roofline dicts when prepare_fn gave no text."""
    lines = []
    for group in ("baseline", "roofline"):
        for key, value in (prepared.get(group) or {}).items():
            lines.append(f"- {group} {key}: {value}")
    return "\n".join(lines)


# -- feedback on one candidate ------------------------------------------------------------------------------

@dataclass(frozen=True)
class FeedbackContext:
    """What every feedback message of a turn shares."""

    turns: int
    best: dict[str, Any] | None
    target: float | None
    max_tokens: int
    labels: Mapping[str, str]   # local folder -> what the model sees instead


def turns_left(turn: int, turns: int) -> str:
    return render(FEEDBACK, "turns_left", n=max(0, turns - turn))


def best_line(best: dict[str, Any] | None) -> str:
    if not best:
        return render(FEEDBACK, "best_none")
    if not speed_measured(best.get("report")):
        return render(FEEDBACK, "speed_unmeasured")
    return render(FEEDBACK, "best", speedup=_times(metric(best["report"], "speedup_eager")), label=best["key"])


def candidate_feedback(cand: dict[str, Any], anchor: dict[str, Any] | None, fc: FeedbackContext) -> str:
    """The next user message of the branch that grows from `cand`; `anchor` is the file to build on."""
    parts = [_verdict(cand, fc)]
    notes = _notes(cand, fc)
    if notes:
        parts.append(notes)
    parts.append(_next(cand, anchor, fc))
    return "\n\n".join(p for p in parts if p)


def _verdict(cand: dict[str, Any], fc: FeedbackContext) -> str:
    label, report = cand["key"], cand.get("report")
    if report is None:
        if cand.get("error") == "budget":
            return render(FEEDBACK, "unverified", label=label)
        if cand.get("truncated"):
            return render(FEEDBACK, "truncated", label=label, max_tokens=fc.max_tokens)
        return render(FEEDBACK, "no_candidate", label=label)
    verifier_text = plain((report.get("feedback") or "").strip() or report.get("message", ""), fc.labels)
    message = plain(report.get("message", ""), fc.labels)
    if accepted(report):
        target = render(FEEDBACK, "target", target=_times(fc.target)) if fc.target else ""
        return render(FEEDBACK, "accepted", label=label, speed=_speed(report), feedback=verifier_text,
                      best=best_line(fc.best), target=target).rstrip()
    if unverified(report):
        return render(FEEDBACK, "compiled_unverified", label=label, feedback=verifier_text).rstrip()
    if verifier_text.strip() == message.strip():
        verifier_text = ""
    return render(FEEDBACK, "rejected", label=label, category=report.get("category", "?"), message=message,
                  feedback=verifier_text).rstrip()


def _notes(cand: dict[str, Any], fc: FeedbackContext) -> str:
    """Duplicate, several blocks, output limit: each said whenever it happened."""
    notes = []
    if cand.get("reused_from"):
        notes.append(render(FEEDBACK, "duplicate", other=cand["reused_from"]))
    if (cand.get("blocks") or 0) > 1:
        why = render(FEEDBACK, "why_marked" if cand.get("marked") else "why_last")
        notes.append(render(FEEDBACK, "blocks", n=cand["blocks"], chosen=cand.get("chosen", cand["blocks"]), why=why))
    if cand.get("hit_limit") and cand.get("report") is not None:
        notes.append(render(FEEDBACK, "hit_limit", max_tokens=fc.max_tokens))
    return "\n".join(notes)


def _next(cand: dict[str, Any], anchor: dict[str, Any] | None, fc: FeedbackContext) -> str:
    left = turns_left(cand["turn"], fc.turns)
    if anchor is None:
        return render(FEEDBACK, "next_fresh", turns_left=left)
    task = render(FEEDBACK, _TASKS.get(anchor.get("verdict") or "", "task_fix"))
    if anchor["key"] == cand["key"]:
        return render(FEEDBACK, "next_self", task=task, label=cand["key"], turns_left=left)
    return render(FEEDBACK, "next_anchor", task=task, anchor=anchor["key"], standing=standing(anchor),
                  label=cand["key"], source=(anchor.get("source") or "").strip("\n"), turns_left=left)


_TASKS = {"accepted": "task_faster", "unverified": "task_check"}  # what to do next with the anchor, by verdict


def standing(anchor: dict[str, Any]) -> str:
    """`turn 2, accepted, 1.30x over eager`, `turn 2, compiled, not verified (no GPU)` or `turn 2, rejected:
    mismatch`."""
    if anchor.get("verdict") == "accepted":
        speed = anchor.get("speedup")
        return f"turn {anchor['turn']}, accepted" + (f", {speed:.2f}x over eager" if speed is not None else "")
    if anchor.get("verdict") == "unverified":
        return f"turn {anchor['turn']}, compiled, not verified (no GPU)"
    return f"turn {anchor['turn']}, rejected: {anchor.get('category', '?')}"


def _speed(report: dict[str, Any]) -> str:
    if not speed_measured(report):
        return render(FEEDBACK, "speed_unmeasured")
    return render(FEEDBACK, "speed", candidate_ms=f"{metric(report, 'candidate_ms'):.4g}",
                  eager_ms=f"{metric(report, 'eager_ms') or float('nan'):.4g}",
                  speedup=_times(metric(report, "speedup_eager")))


# -- branch messages ------------------------------------------------------------------------------------

def restart_message(root: list[dict[str, str]], summary: str, turn: int) -> list[dict[str, str]]:
    """A fresh branch: the first prompt plus a note that the last approach kept failing."""
    first = root[0]["content"] + "\n\n" + render(FEEDBACK, "restart", summary=summary, turn=turn)
    return [{"role": "user", "content": first}]


def parallel_note(messages: list[dict[str, str]], i: int, n: int) -> list[dict[str, str]]:
    """The branch's messages for attempt `i` (1-based) of `n` answering the same message; attempt 1 unchanged."""
    if n <= 1 or i <= 1:
        return messages
    last = dict(messages[-1])
    last["content"] = last["content"] + "\n\n" + render(FEEDBACK, "parallel", i=i, n=n)
    return messages[:-1] + [last]


def first_line(text: str) -> str:
    return next((s.strip() for s in text.splitlines() if s.strip()), "")


def trim_history(messages: list[dict[str, str]], keep_pairs: int) -> list[dict[str, str]]:
    """The conversation with only the last `keep_pairs` (reply, feedback) pairs kept verbatim.

    Dropped pairs become one line each (their feedback's first line, which names the candidate),
    prefixed to the first kept feedback, so roles still alternate and the first message (cached) is untouched.
    """
    head, pairs, keep_pairs = messages[:1], messages[1:], max(1, keep_pairs)
    if len(pairs) <= 2 * keep_pairs:
        return list(messages)
    cut = len(pairs) - 2 * keep_pairs
    dropped, kept = pairs[:cut], [dict(m) for m in pairs[cut:]]
    lines = "\n".join(f"- {first_line(m['content'])}" for m in dropped if m["role"] == "user")
    note = render(FEEDBACK, "earlier", lines=lines)
    kept[1]["content"] = note + "\n\n" + kept[1]["content"]
    return head + kept
