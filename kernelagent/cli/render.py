"""All terminal rendering with rich: verification reports, audits, doctor (the CLI's default output)."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kernelagent.verifier.judge.feedback import UNVERIFIED_HEAD, compile_lines, speed_lines
from kernelagent.verifier.report import Report

_STATUS_STYLE = {"passed": "green", "failed": "bold red", "skipped": "yellow", "warning": "yellow"}


def stages_table(report: Report) -> Table:
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("stage")
    table.add_column("status")
    table.add_column("time", justify="right")
    table.add_column("note", overflow="fold")
    for s in report.stages:
        table.add_row(s.name, Text(s.status, style=_STATUS_STYLE.get(s.status, "")), f"{s.seconds:.2f}s",
                      Text(s.message[:160]))  # Text: a message may hold "[...]" that rich would read as markup
    return table


def verdict_title(report: Report) -> tuple[str, str]:
    """The panel's title and colour: accepted, compiled but not verified (no GPU), or rejected."""
    if report.accepted:
        return "ACCEPTED", "green"
    if report.unverified:
        return UNVERIFIED_HEAD, "yellow"
    return f"REJECTED: {report.category}", "red"


def render_report(report: Report) -> Group:
    ok = report.accepted
    head, colour = verdict_title(report)
    title = Text(head, style=f"bold {colour}")
    lines: list[object] = [Text(report.message)]
    env = report.environment
    where = env.get("gpu") or ("CPU (Triton interpreter)" if env.get("device") == "cpu" else env.get("device", ""))
    if where:
        lines.append(Text(f"on {where}; torch {env.get('torch', '?')}, triton {env.get('triton', '?')}", style="dim"))
    line = confinement_line(env.get("confinement"))
    if line:
        lines.append(line)
    lines.append(stages_table(report))
    m = report.metrics
    if m.get("rel_l2") is not None:
        lines.append(Text(f"accuracy: worst rel L2 {m['rel_l2']:.2e}, max abs {m.get('max_abs_err', 0):.2e} over "
                          f"{m.get('trials_passed', 0)}/{m.get('trials', 0)} trials"))
    for s in speed_lines(m):
        lines.append(Text(s))
    kernels = next((s.details.get("kernels") for s in report.stages if s.name == "compile"), None)
    for s in compile_lines(kernels or []):
        lines.append(Text(s, style="dim"))
    if not ok and report.feedback:
        detail = report.feedback.split("\n\n", 1)[1] if "\n\n" in report.feedback else ""
        if detail:
            lines.append(Panel(Text(detail[:3000]), title="details", border_style=colour))
    return Group(Panel(Group(*lines), title=title, border_style=colour))


def confinement_line(c: dict[str, Any] | None) -> Text | None:
    """What walled the candidate in; a visible warning when some layer was missing."""
    if not c:
        return None
    level = c.get("level", "none")
    if level == "strict":
        return Text(f"confined: namespaces {','.join(c.get('namespaces') or [])}; landlock {c.get('landlock', '-')}; "
                    f"seccomp {str(c.get('seccomp', '-')).split(' (')[0]}", style="dim")
    missing = ", ".join(c.get("missing") or []) or "unknown"
    return Text(f"warning: the candidate ran with {level} confinement (missing: {missing}); "
                "`--confinement strict` refuses to run without every layer", style="bold yellow")


def render_audit(result: dict[str, Any]) -> Group:
    """One problem's audit (the folder's summary and progress display live in cli/audit_render.py)."""
    from kernelagent.cli.audit_render import render_one

    return render_one(result)


def render_doctor(info: dict[str, Any]) -> Table:
    table = Table(box=None, show_header=False)
    for key in ("kernelagent", "mode", "gpu", "capability", "driver", "cuda", "python", "torch", "triton",
                "cutlass_dsl", "ncu", "compute_sanitizer"):
        table.add_row(key, str(info.get(key) if info.get(key) is not None else "-"))
    keys = ", ".join(f"{k} {'set' if v else 'not set'}" for k, v in info["api_keys"].items())
    table.add_row("provider settings", keys)
    c = info.get("ceilings")
    if c:
        table.add_row("ceilings", f"copy {c['copy_gbps']:.0f} GB/s, bf16 {c['bf16_tflops']:.0f} TFLOP/s, "
                      f"tf32 {c['tf32_tflops']:.0f}, fp32 {c['fp32_tflops']:.0f} ({c.get('source', '')})")
    for key, path in (info.get("paths") or {}).items():
        table.add_row(key.replace("_", " "), path)
    cache = info.get("cache") or {}
    if "error" in cache:
        table.add_row("cache use", Text(cache["error"], style="bold red"))
    elif cache:
        table.add_row("cache use", f"{cache['entries']} pack(s), {cache['bytes'] / 1e6:.1f} of "
                      f"{cache['max_bytes'] / 1e9:.1f} GB, entries serve {cache['max_age_hours']:g} h")
    return table
