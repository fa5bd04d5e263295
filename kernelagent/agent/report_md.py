"""The markdown report written next to the output kernel: outcome, per-attempt table, cost."""

from __future__ import annotations

from typing import Any

from kernelagent.agent.scoring import metric, speed_measured
from kernelagent.agent.text import plain

MESSAGE_CHARS = 90


def _num(x: float | None, fmt: str = "{:.3g}") -> str:
    return fmt.format(x) if x is not None else "–"


def _cell(text: str) -> str:
    text = " ".join(plain(str(text)).split()).replace("|", "\\|")
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


def best_line(best: dict[str, Any] | None) -> str:
    """One line on the best kernel: speedups, times, roofline."""
    if not best:
        return "no candidate was accepted"
    r = best["report"]
    if not speed_measured(r):
        return f"{best['key']} (turn {best['turn']}), accepted; speed not measured"
    parts = [f"{_num(metric(r, 'speedup_eager'), '{:.2f}')}x over eager "
             f"({_num(metric(r, 'candidate_ms'))} ms vs {_num(metric(r, 'eager_ms'))} ms)"]
    if metric(r, "speedup_compile") is not None:
        parts.append(f"{metric(r, 'speedup_compile'):.2f}x over torch.compile")
    if metric(r, "roofline_pct") is not None:
        bound = (r.get("metrics") or {}).get("roofline_bound") or ""
        parts.append(f"{metric(r, 'roofline_pct'):.0f}% of the {bound} roofline".replace("the  ", "the "))
    return f"{best['key']} (turn {best['turn']}): " + ", ".join(parts)


def _summary(state: dict[str, Any], info: dict[str, Any]) -> list[str]:
    rows = state.get("history", [])
    t = state.get("tokens") or {}
    budget = info.get("budget_usd")
    verified = [r for r in rows if r["verdict"] != "none"]
    unverified = sum(r["verdict"] == "unverified" for r in rows)
    lines = [
        ("status", f"{state.get('stop')}: {info.get('stop_text', '')}"),
        ("provider", f"{info.get('provider')} / {info.get('model')}"),
        ("turns", f"{state.get('turn', 0)} of {info.get('turns')}"),
        ("candidates", f"{len(rows)} proposed, {len(verified)} verified, "
                       f"{sum(r['verdict'] == 'accepted' for r in rows)} accepted"
                       + (f", {unverified} compiled but not run (no GPU)" if unverified else "")),
        ("best", best_line(state.get("best"))),
        ("kernel", state.get("out_path") or "none written"),
        ("tokens", f"{t.get('input', 0)} in, {t.get('output', 0)} out, {t.get('cache_read', 0)} cache read, "
                   f"{t.get('cache_write', 0)} cache write"),
        ("cost", f"${state.get('cost_usd', 0.0):.4f}" + (f" of a ${budget:.2f} budget" if budget else "")),
        ("verifier time", f"{state.get('verify_seconds', 0.0):.1f} s"),
    ]
    return ["| | |", "|---|---|"] + [f"| {k} | {_cell(v) if k != 'best' else v} |" for k, v in lines]


def _attempts(rows: list[dict[str, Any]]) -> list[str]:
    head = ["| turn | cand | from | verdict | category | ms | vs eager | vs compile | roofline | tokens | $ "
            "| message |", "|---:|---:|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    body = [f"| {r['turn']} | {r['index']} | {r['branch']} | "
            f"{r['verdict']}{' (reused)' if r.get('reused') else ''} | {r['category']} "
            f"| {_num(r['candidate_ms'])} | {_num(r['speedup_eager'], '{:.2f}x')} "
            f"| {_num(r['speedup_compile'], '{:.2f}x')} | {_num(r['roofline_pct'], '{:.0f}%')} "
            f"| {r['tokens']} | {r['cost_usd']:.4f} | {_cell(r['message'])} |" for r in rows]
    return head + body


def _prepared(prepared: dict[str, Any]) -> list[str]:
    if prepared.get("text"):
        return ["", "## The problem on the machine that verified it", "", plain(prepared["text"]).strip()]
    lines = [f"- {g} {k}: {v}" for g in ("baseline", "roofline") for k, v in (prepared.get(g) or {}).items()]
    return ["", "## The problem on the machine that verified it", "", *lines] if lines else []


def render_report(state: dict[str, Any], info: dict[str, Any]) -> str:
    """Markdown for a finished run. `info`: provider, model, turns, budget_usd, stop_text."""
    problem = (state.get("problem") or {}).get("name", "?")
    out = [f"# kernelagent run {state.get('run_id')}: {problem} ({state.get('backend')})", ""]
    out += _summary(state, info)
    best = state.get("best")
    if best and not speed_measured(best["report"]):
        out += ["", "**Speed was not measured**: the verifier ran without a GPU, so the run stopped at the "
                    "first accepted kernel. Run it again on a GPU machine to time and optimise it."]
    if not best and any(r["verdict"] == "unverified" for r in state.get("history", [])):
        out += ["", "**Not verified**: candidates compiled, but the verifier ran without a GPU, so none was run "
                    "and none was accepted. Run it again on a GPU machine to check and time them."]
    out += _prepared(state.get("prepared") or {})
    out += ["", "## Attempts", "", *_attempts(state.get("history", []))]
    if best and best["report"].get("feedback"):
        out += ["", "## Verifier report on the best kernel", "", "```text",
                plain(best["report"]["feedback"]).strip(), "```"]
    return "\n".join(out) + "\n"
