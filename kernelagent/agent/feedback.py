"""The user messages of the loop: the first prompt, each candidate's feedback, and history trimming.

All wording lives in `kernelagent/prompts/{problem,feedback}.md`; this module only picks sections and
fills them. A branch keeps its first message and its last few (reply, feedback) pairs verbatim;
older pairs shrink to the first line of their feedback, so the context stays bounded.
"""

from __future__ import annotations

from typing import Any

from kernelagent.agent.prompts import BACKEND_NAMES, render
from kernelagent.agent.scoring import accepted, metric, speed_measured

FEEDBACK, PROBLEM = "feedback.md", "problem.md"
EXAMPLE_CHARS = 6000  # an example longer than this is cut; two of them stay well under 4k tokens


def _times(x: float | None) -> str:
    return f"{x:.2f}x" if x is not None else "?"


def first_prompt(problem: dict[str, Any], backend: str, prepared: dict[str, Any],
                 examples: list[dict[str, Any]], lessons: list[str]) -> str:
    """The opening user message: the reference, baseline and roofline, similar kernels, lessons."""
    parts = {"context": "", "examples": "", "lessons": ""}
    text = prepared.get("text") or _describe(prepared)
    if text:
        parts["context"] = "\n\n" + render(PROBLEM, "context", text=text)
    if examples:
        items = "\n\n".join(render(PROBLEM, "example", name=e.get("problem") or e.get("name", "?"),
                                   backend=e.get("backend", backend), speedup=_times(e.get("speedup")),
                                   source=_clip(e.get("source", ""))) for e in examples)
        parts["examples"] = "\n\n" + render(PROBLEM, "examples", items=items)
    if lessons:
        parts["lessons"] = "\n\n" + render(PROBLEM, "lessons", items="\n".join(f"- {x}" for x in lessons))
    return render(PROBLEM, name=problem["name"], backend=BACKEND_NAMES.get(backend, backend),
                  source=problem["source"].strip("\n"), **parts) + "\n"


def _describe(prepared: dict[str, Any]) -> str:
    """`key: value` lines of the baseline and roofline dicts when prepare_fn gave no text."""
    lines = []
    for group in ("baseline", "roofline"):
        for key, value in (prepared.get(group) or {}).items():
            lines.append(f"- {group} {key}: {value}")
    return "\n".join(lines)


def _clip(source: str) -> str:
    return source if len(source) <= EXAMPLE_CHARS else source[:EXAMPLE_CHARS] + "\n# ... (cut)"


def turns_left(turn: int, turns: int) -> str:
    return render(FEEDBACK, "turns_left", n=max(0, turns - turn))


def best_line(best: dict[str, Any] | None) -> str:
    if not best:
        return render(FEEDBACK, "best_none")
    if not speed_measured(best.get("report")):
        return render(FEEDBACK, "speed_unmeasured")
    return render(FEEDBACK, "best", speedup=_times(metric(best["report"], "speedup_eager")),
                  turn=best["turn"])


def candidate_feedback(cand: dict[str, Any], *, turns: int, best: dict[str, Any] | None,
                       target: float | None) -> str:
    """The next user message of the branch that grows from `cand`."""
    turn, left = cand["turn"], turns_left(cand["turn"], turns)
    report = cand.get("report")
    if report is None:
        section = "truncated" if cand.get("truncated") else "no_candidate"
        return render(FEEDBACK, section, turn=turn, turns_left=left)
    verifier_text = (report.get("feedback") or "").strip() or report.get("message", "")
    if accepted(report):
        text = render(FEEDBACK, "accepted", turn=turn, speed=_speed(report), feedback=verifier_text,
                      best=best_line(best), turns_left=left,
                      target=render(FEEDBACK, "target", target=_times(target)) if target else "")
    else:
        text = render(FEEDBACK, "rejected", turn=turn, category=report.get("category", "?"),
                      message=report.get("message", ""), feedback=verifier_text, turns_left=left)
    if cand.get("reused_from") is not None:
        text = render(FEEDBACK, "duplicate", turn=cand["reused_from"]) + "\n\n" + text
    return text


def _speed(report: dict[str, Any]) -> str:
    if not speed_measured(report):
        return render(FEEDBACK, "speed_unmeasured")
    return render(FEEDBACK, "speed", candidate_ms=f"{metric(report, 'candidate_ms'):.4g}",
                  eager_ms=f"{metric(report, 'eager_ms') or float('nan'):.4g}",
                  speedup=_times(metric(report, "speedup_eager")))


def restart_message(root: list[dict[str, str]], summary: str) -> list[dict[str, str]]:
    """A fresh branch: the first prompt plus a note that the last approach kept failing."""
    first = root[0]["content"] + "\n\n" + render(FEEDBACK, "restart", summary=summary)
    return [{"role": "user", "content": first}]


def first_line(text: str) -> str:
    return next((s.strip() for s in text.splitlines() if s.strip()), "")


def trim_history(messages: list[dict[str, str]], keep_pairs: int) -> list[dict[str, str]]:
    """The conversation with only the last `keep_pairs` (reply, feedback) pairs kept verbatim.

    Dropped pairs become one line each (their feedback's first line), prefixed to the first kept
    feedback, so roles still alternate and the first message (cached) is untouched.
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
