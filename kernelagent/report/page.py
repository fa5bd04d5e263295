"""The HTML page: one self-contained file (inline CSS, inline SVG charts, no scripts, nothing fetched)."""

from __future__ import annotations

from html import escape
from typing import Any

from kernelagent.report import svg

CSS = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:980px;color:#1f2328;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #d0d7de}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}td,th{border:1px solid #d0d7de;padding:3px 8px}
th{background:#f6f8fa;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
.accepted{color:#1a7f37}.unverified{color:#9a6700}.rejected{color:#cf222e}.muted{color:#656d76}
pre{background:#f6f8fa;padding:1rem;overflow:auto;font-size:.8rem;border:1px solid #d0d7de}
figure{margin:1rem 0}
"""
COMPILE_TITLE, COMPILE_AXIS = "speedup vs torch.compile, best kernel per problem", "speedup vs torch.compile (x, log)"


def _num(value: Any, fmt: str = "{:.3g}", missing: str = "not measured") -> str:
    return missing if value is None else fmt.format(value)


def _pct(value: float | None) -> str:
    return "not measured" if value is None else f"{100 * value:.1f}%"


def table(headers: list[str], rows: list[list[Any]], numeric: set[int] | None = None) -> str:
    numeric = numeric or set()
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f'<td{" class=num" if i in numeric else ""}>{c}</td>'
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def page(title: str, sections: list[str]) -> str:
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{CSS}</style></head><body>\n<h1>{escape(title)}</h1>\n" + "\n".join(sections)
            + "\n</body></html>\n")


def _verdict(a: dict[str, Any]) -> str:
    cls = a.get("verdict") if a.get("verdict") in ("accepted", "unverified") else "rejected"
    text = {"accepted": "accepted", "unverified": "compiled, not verified (no GPU)"}.get(
        cls, a.get("category") or a.get("verdict") or "")
    return f'<span class="{cls}">{escape(str(text))}</span>'


def _ci(a: dict[str, Any]) -> str:
    m = a.get("metrics") if isinstance(a.get("metrics"), dict) else {}
    ci = m.get("speedup_eager_ci")
    if a.get("speedup_eager") is None:
        return "not measured"
    return f"{a['speedup_eager']:.3g}x" + (f" [{ci[0]:.3g}, {ci[1]:.3g}]" if ci else "")


def run_page(d: dict[str, Any]) -> str:
    """A run: facts, progress per turn, speedups with intervals, accepted kernels on the roofline, the winner."""
    run = d["run"]
    facts = table(["run", "kind", "problem", "status", "provider / model", "GPU", "tokens", "cost", "LLM calls"], [[
        escape(run["id"]), escape(run.get("kind") or ""), escape(d["problem"]), escape(run.get("status") or ""),
        escape(f"{run.get('provider') or '-'} / {run.get('model') or '-'}"), escape(d["gpu"] or "no GPU (CPU)"),
        f"{run.get('tokens_in') or 0} in, {run.get('tokens_out') or 0} out", f"${run.get('cost_usd') or 0:.2f}",
        str(d["exchanges"])]])
    turns, best = [p["turn"] for p in d["progress"]], [p["best_speedup"] for p in d["progress"]]
    chart = svg.line_chart("best speedup vs eager after each turn", turns, best, "turn", "speedup (x)")
    sections = [facts, "<h2>Progress per turn</h2>", f"<figure>{chart}</figure>",
                table(["turn", "attempts", "accepted", "best so far"],
                      [[p["turn"], p["attempts"], p["accepted"], _num(p["best_speedup"], "{:.3g}x", "-")]
                       for p in d["progress"]], {0, 1, 2, 3}),
                "<h2>Speedup per attempt (95% interval)</h2>",
                f"<figure>{svg.speedup_chart('speedup vs eager per attempt', d['points'])}</figure>",
                _attempts_table(d["attempts"]), "<h2>Roofline</h2>", f"<figure>{_roofline(d)}</figure>"]
    win = d["winner"]
    sections.append("<h2>Winning kernel</h2>")
    sections.append(f"<p>attempt {escape(win['id'])}, {_ci(win)} vs eager</p><pre><code>"
                    f"{escape(win.get('source') or '')}</code></pre>" if win else "<p>no kernel was accepted</p>")
    return page(f"kernelagent run {run['id']}: {d['problem']}", sections)


def _roofline(d: dict[str, Any]) -> str:
    c = d.get("ceilings") or {}
    if not d["roofline"] or not c:
        return svg.placeholder("roofline", "no accepted kernel was timed on a GPU")
    key = "bf16_tflops" if any(p.get("bound") == "matmul" for p in d["roofline"]) else "fp32_tflops"
    return svg.roofline_chart(f"accepted kernels on the {d['gpu']} roofline ({key.split('_')[0]} compute roof)",
                              d["roofline"], float(c.get("copy_gbps") or 1.0), float(c.get(key) or 1.0))


def _attempts_table(attempts: list[dict[str, Any]]) -> str:
    rows = [[escape(a["id"][:8]), a.get("turn"), a.get("candidate_index"), _verdict(a),
             _num(a.get("candidate_ms"), "{:.4g}"), _ci(a), _num(a.get("speedup_compile"), "{:.3g}x"),
             _num(a.get("roofline_pct"), "{:.0f}%"), escape((a.get("message") or "")[:120])] for a in attempts]
    return table(["attempt", "turn", "cand.", "verdict", "ms", "vs eager [CI]", "vs compile", "roofline", "message"],
                 rows, {1, 2, 4, 6, 7})


def _correct(p: dict[str, Any]) -> str:
    """A problem's cell: yes, no, or compiled but not verified (its best kernels could not be run: no GPU)."""
    if p["correct"]:
        return "yes"
    return '<span class="unverified">not verified (no GPU)</span>' if p.get("unverified") else "no"


def batch_page(d: dict[str, Any]) -> str:
    """A batch: the fast_p table against eager and torch.compile, the speedup distribution, every problem."""
    s, b = d["summary"], d["batch"]
    facts = table(["batch", "mode", "status", "problems", "evaluated", "no candidate", "candidates", "correct"], [[
        escape(b["id"]), escape(b["mode"]), escape(b["status"]), s["problems"], s["evaluated"], s["no_candidate"],
        s["candidates"], f"{s['correct']} ({_num(s['correct_pct'], '{:.1f}%', 'n/a')})"]])
    fast = table(["baseline", "fast_0 (correct)", "fast_1", "fast_1.5", "geomean speedup", "timed"],
                 [[name, _pct(s[key]["fast_0"]), _pct(s[key]["fast_1"]), _pct(s[key]["fast_1.5"]),
                   _num(s[key]["geomean_speedup"], "{:.3g}x"), s[key]["measured"]]
                  for name, key in (("eager", "eager"), ("torch.compile", "compile"))], {5})
    per = table(["problem", "candidates", "correct", "vs eager", "vs compile", "failures"],
                [[escape(p["problem"]), p["candidates"], _correct(p),
                  _num(p["speedup_eager"], "{:.3g}x"), _num(p["speedup_compile"], "{:.3g}x"),
                  escape(", ".join(f"{k} {v}" for k, v in p["failures"].items()))] for p in s["per_problem"]], {1})
    sections = [facts, "<h2>KernelBench summary</h2>", fast,
                '<p class="muted">shares are over evaluated problems (those with a candidate); fast_p: correct '
                "and more than p times faster than the baseline.</p>", "<h2>Speedup distribution</h2>",
                f"<figure>{svg.histogram('speedup vs eager, best kernel per problem', d['speedups'])}</figure>",
                f"<figure>{svg.histogram(COMPILE_TITLE, d['speedups_compile'], COMPILE_AXIS)}</figure>",
                "<h2>Problems</h2>", per]
    return page(f"kernelagent batch {b['id']} ({b['mode']})", sections)
