"""What the agent recalls before a run: accepted kernels of similar problems, and lessons from failures.

Similarity is the Jaccard overlap of op signatures (the sorted aten ops a reference dispatches).
Lessons count the failure categories seen for a backend and, where a later attempt on the same branch
was accepted, say what changed between the failing source and the accepted one.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from typing import Any

from kernelagent.memory.store import Store

LESSON_MAX = 200
# internal errors are the verifier's fault, and compile_only (compiled, never run: no GPU) no failure: no lesson
SKIPPED_CATEGORIES = ("ok", "compile_only", "internal_error")

_BEST_PER_PROBLEM = """
select * from (
  select a.id as attempt_id, a.problem_id, p.name as problem, p.op_signature, a.backend, a.source,
         a.speedup_eager as speedup, a.speedup_compile, a.roofline_pct, a.gpu, a.created,
         row_number() over (partition by a.problem_id, a.backend
                            order by coalesce(a.speedup_eager, 0) desc, a.created desc) as rank_in_problem
  from attempts a join problems p on p.id = a.problem_id
  where a.verdict = 'accepted' and (:ex is null or (p.id != :ex and p.name != :ex))
) where rank_in_problem = 1
"""


def jaccard(a: list[str] | set[str], b: list[str] | set[str]) -> float:
    """|a ∩ b| / |a ∪ b|, and 0.0 when both are empty."""
    sa, sb = set(a), set(b)
    return len(sa & sb) / len(sa | sb) if sa | sb else 0.0


def similar_accepted(store: Store, op_signature: list[str], backend: str | None = None, limit: int = 3,
                     exclude_problem: str | None = None) -> list[dict[str, Any]]:
    """Best accepted kernel of each problem whose signature overlaps `op_signature`, most similar first.

    Ranked by overlap, then same backend as `backend`, then speedup over eager, then recency.
    `exclude_problem` (id or name) leaves out the problem being optimised.
    """
    rows = store.query(_BEST_PER_PROBLEM, {"ex": exclude_problem})
    for row in rows:
        row["overlap"] = round(jaccard(op_signature, row["op_signature"] or []), 6)
        row.pop("rank_in_problem")
    rows = [r for r in rows if r["overlap"] > 0]
    rows.sort(key=lambda r: r["created"], reverse=True)  # stable sorts: recency breaks the last ties
    rows.sort(key=lambda r: (r["overlap"], backend is not None and r["backend"] == backend,
                             r["speedup"] or 0.0), reverse=True)
    return rows[:limit]


def first_line(text: str | None) -> str:
    """The first non-blank line of `text`, without list or heading markers."""
    for line in (text or "").splitlines():
        line = line.strip().lstrip("#-*> ").strip()
        if line:
            return line
    return ""


def _shape(line: str) -> str:
    """Grouping key for feedback lines that differ only in numbers."""
    return re.sub(r"\d+(\.\d+)?", "N", line.lower())


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: max(0, n - 1)].rstrip() + "…"


def _code_lines(source: str) -> list[str]:
    return [s for s in (line.strip() for line in source.splitlines()) if s and not s.startswith("#")]


def change_summary(before: str, after: str) -> str:
    """The first change from `before` to `after`, e.g. "`a` → `b`", ignoring blanks and comments."""
    old, new = _code_lines(before), _code_lines(after)
    for tag, i1, _i2, j1, _j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag == "replace":
            return f"`{_clip(old[i1], 60)}` → `{_clip(new[j1], 60)}`"
        if tag == "insert":
            return f"adding `{_clip(new[j1], 80)}`"
        if tag == "delete":
            return f"removing `{_clip(old[i1], 80)}`"
    return "an unchanged source"


def _find_fix(failure: dict, by_id: dict[str, dict], children: dict[str, list[str]],
              run_rows: list[dict], has_lineage: bool) -> tuple[dict, int] | None:
    """Nearest accepted descendant of `failure` and its distance in turns, or None."""
    frontier, depth, seen = [failure["id"]], 0, set()
    while frontier:
        depth += 1
        frontier = [c for f in frontier for c in children.get(f, []) if c not in seen]
        seen.update(frontier)
        hit = next((by_id[c] for c in frontier if by_id[c]["verdict"] == "accepted"), None)
        if hit:
            return hit, depth
    if has_lineage:
        return None  # the run records parents: trust the tree
    later = [r for r in run_rows if r["verdict"] == "accepted" and r["turn"] > failure["turn"]]
    return (later[0], later[0]["turn"] - failure["turn"]) if later else None


def _fixes(rows: list[dict]) -> dict[str, tuple[dict, int]]:
    """Map failing attempt id -> (the accepted attempt that followed it on its branch, turns later)."""
    by_id = {r["id"]: r for r in rows}
    children: dict[str, list[str]] = {}
    runs: dict[str, list[dict]] = {}
    for r in rows:
        if r["parent_id"]:
            children.setdefault(r["parent_id"], []).append(r["id"])
        if r["run_id"]:
            runs.setdefault(r["run_id"], []).append(r)
    lineage = {run for run, members in runs.items() if any(m["parent_id"] for m in members)}
    out = {}
    for r in rows:
        if r["verdict"] != "accepted":
            fix = _find_fix(r, by_id, children, runs.get(r["run_id"], []), r["run_id"] in lineage)
            if fix:
                out[r["id"]] = fix
    return out


def _lesson(store: Store, category: str, failures: list[dict], fixes: dict) -> str:
    lines = [first_line(f["feedback"]) or first_line(f["message"]) for f in failures]
    top_shape, _ = Counter(_shape(line) for line in lines).most_common(1)[0]
    headline = next(line for line in reversed(lines) if _shape(line) == top_shape)
    fixed = [f for f in failures if f["id"] in fixes]
    head = f"{category} ({len(failures)}x" + (f", {len(fixed)} fixed)" if fixed else ")")
    suffix = ""
    if fixed:
        example = next((f for f in reversed(fixed) if _shape(first_line(f["feedback"])) == top_shape),
                       fixed[-1])
        good, turns = fixes[example["id"]]
        when = "next turn" if turns == 1 else f"{turns} turns later"
        sources = {r["id"]: r["source"] for r in store.query(
            "select id, source from attempts where id in (?, ?)", (example["id"], good["id"]))}
        change = change_summary(sources[example["id"]], sources[good["id"]])
        suffix = _clip(f"; fixed {when} by {change}", 110)
    room = LESSON_MAX - len(head) - len(suffix) - 2
    return f"{head}: {_clip(headline or 'no feedback', room)}{suffix}"


def lessons(store: Store, backend: str, limit: int = 5, min_count: int = 2) -> list[str]:
    """Short lines on failure categories seen at least `min_count` times for `backend`, commonest first."""
    rows = store.query("select id, run_id, parent_id, turn, verdict, category, substr(feedback, 1, 500) "
                       "as feedback, message from attempts where backend = ? order by created, rowid",
                       (backend,))
    failures = [r for r in rows if r["verdict"] != "accepted" and r["category"] not in SKIPPED_CATEGORIES]
    counts = Counter(r["category"] for r in failures)
    fixes = _fixes(rows)
    out = []
    for category, n in counts.most_common(limit):
        if n < min_count:
            break
        out.append(_lesson(store, category, [f for f in failures if f["category"] == category], fixes))
    return out
