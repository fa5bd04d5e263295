"""Feedback written for the LLM: what failed and where, by how much, how fast, what to change.

It names the rule and what to do instead, never how a check works, so it cannot teach a model to
pass a check without doing the work.
"""

from __future__ import annotations

from typing import Any

from kernelagent.verifier.report import Report

MAX_FEEDBACK = 6000
UNVERIFIED_HEAD = "COMPILED, NOT VERIFIED (no GPU)"  # every client's words for verdict `unverified`


def _fmt_ms(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x * 1e3:.1f} us" if x < 1 else f"{x:.3f} ms"


def speed_lines(metrics: dict[str, Any]) -> list[str]:
    lines = []
    if metrics.get("candidate_ms") is not None:
        lines.append(f"your kernel: {_fmt_ms(metrics['candidate_ms'])} median "
                     f"(IQR {_fmt_ms(metrics.get('candidate_iqr_ms'))}, {metrics.get('timing_method', 'events')})")
        for base in ("eager", "compile"):
            ms, sp = metrics.get(f"{base}_ms"), metrics.get(f"speedup_{base}")
            if ms is None or sp is None:
                continue
            lo, hi = (metrics.get(f"speedup_{base}_ci") or [None, None])
            ci = f" [95% CI {lo:.2f}-{hi:.2f}]" if lo is not None else ""
            name = "PyTorch eager" if base == "eager" else "torch.compile"
            lines.append(f"{name}: {_fmt_ms(ms)} -> speedup {sp:.2f}x{ci}")
    if metrics.get("roofline_pct") is not None:
        lines.append(f"roofline: {metrics['roofline_pct']:.0f}% of the {metrics.get('roofline_bound')} limit "
                     f"(floor {_fmt_ms(metrics.get('roofline_floor_ms'))})")
    return lines


def compile_lines(kernels: list[dict[str, Any]], most: int = 4) -> list[str]:
    """One line per distinct compiled variant (the same kernel specialised for several shapes repeats)."""
    out: list[str] = []
    for k in kernels:
        name = str(k.get("kernel"))
        bits = [f"{name[:48] + '...' if len(name) > 51 else name}:"]
        for key, label in (("registers", "registers"), ("spills", "spill bytes"), ("shared_bytes", "smem bytes"),
                           ("num_warps", "warps"), ("num_stages", "stages")):
            if k.get(key) is not None:
                bits.append(f"{label}={k[key]}")
        line = " ".join(bits)
        if line not in out:
            out.append(line)
    if len(out) > most:
        out = out[:most] + [f"(+{len(out) - most} more variants)"]
    return out


def build_feedback(report: Report, *, detail: str = "", notes: list[str] | None = None,
                   kernels: list[dict[str, Any]] | None = None) -> str:
    if report.accepted:
        head = "ACCEPTED: correct on every trial."
    elif report.unverified:
        head = (f"{UNVERIFIED_HEAD}: {report.message}. The kernel was never run, so nothing checked its "
                "outputs: correctness is unknown until it is verified on a GPU.")
    else:
        head = f"REJECTED ({report.category}): {report.message}"
    parts = [head]
    if detail:
        parts.append(detail.strip())
    speed = speed_lines(report.metrics)
    if speed:
        parts.append("Speed:\n" + "\n".join(f"- {s}" for s in speed))
    if kernels:
        parts.append("Compiled kernels:\n" + "\n".join(f"- {s}" for s in compile_lines(kernels)))
    for n in notes or []:
        parts.append(f"Note: {n}")
    text = "\n\n".join(parts)
    return text if len(text) <= MAX_FEEDBACK else text[:MAX_FEEDBACK] + "\n[feedback truncated]"
