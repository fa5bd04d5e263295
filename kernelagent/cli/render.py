"""All terminal rendering with rich: verification reports, audits, doctor (the CLI's default output)."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kernelagent.verifier.judge.feedback import compile_lines, speed_lines
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
                      s.message[:160])
    return table


def render_report(report: Report) -> Group:
    ok = report.accepted
    title = Text("ACCEPTED" if ok else f"REJECTED: {report.category}", style="bold green" if ok else "bold red")
    lines: list[object] = [Text(report.message)]
    env = report.environment
    where = env.get("gpu") or ("CPU (Triton interpreter)" if env.get("device") == "cpu" else env.get("device", ""))
    if where:
        lines.append(Text(f"on {where}; torch {env.get('torch', '?')}, triton {env.get('triton', '?')}", style="dim"))
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
            lines.append(Panel(detail[:3000], title="details", border_style="red"))
    return Group(Panel(Group(*lines), title=title, border_style="green" if ok else "red"))


def render_audit(result: dict[str, Any]) -> Group:
    if result.get("error"):
        return Group(Text(f"audit failed: {result['error']}", style="bold red"))
    table = Table(box=None, show_header=False)
    table.add_row("problem", str(result.get("problem")))
    table.add_row("degenerate", Text("yes", style="bold red") if result["degenerate"] else Text("no", style="green"))
    table.add_row("trivial answers that pass", ", ".join(result["trivial_answers_that_pass"]) or "none")
    var = result.get("output_variation_across_seeds")
    table.add_row("output variation across seeds", f"{var:.2e}" if var is not None else "n/a")
    table.add_row("advice", result.get("advice", ""))
    return Group(table)


def render_doctor(info: dict[str, Any]) -> Table:
    table = Table(box=None, show_header=False)
    for key in ("mode", "gpu", "capability", "driver", "cuda", "python", "torch", "triton", "cutlass_dsl",
                "ncu", "compute_sanitizer"):
        table.add_row(key, str(info.get(key) if info.get(key) is not None else "-"))
    keys = ", ".join(f"{k} {'set' if v else 'not set'}" for k, v in info["api_keys"].items())
    table.add_row("provider settings", keys)
    c = info.get("ceilings")
    if c:
        table.add_row("ceilings", f"copy {c['copy_gbps']:.0f} GB/s, bf16 {c['bf16_tflops']:.0f} TFLOP/s, "
                      f"tf32 {c['tf32_tflops']:.0f}, fp32 {c['fp32_tflops']:.0f} ({c.get('source', '')})")
    return table
