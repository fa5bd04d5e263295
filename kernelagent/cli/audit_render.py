"""Rendering of audits with rich: one problem, a folder's summary, and the live progress of a folder audit."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from kernelagent.verifier.estimate import fmt_bytes

_FAILED = {"error": "problem error", "refused": "too large", "oom": "out of memory", "timeout": "timeout",
           "crashed": "crashed", "internal": "internal error"}


def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2e}"


def _variation(var: dict[str, Any] | None) -> str:
    var = var or {}
    parts = [f"new inputs {_num(var.get('inputs'))}"]
    if var.get("parameters") is not None:
        parts.append(f"new parameters {_num(var.get('parameters'))}")
    if var.get("both") is not None:
        parts.append(f"both {_num(var.get('both'))}")
    return " · ".join(parts)


def _memory(mem: dict[str, Any] | None) -> str:
    if not mem or "estimate" not in mem:
        return ""
    est = mem["estimate"]
    text = f"estimated {fmt_bytes(est['host_bytes'])} host"
    if est.get("device_bytes"):
        text += f", {fmt_bytes(est['device_bytes'])} GPU"
    if mem.get("peak_host_bytes"):
        text += f"; peak {fmt_bytes(mem['peak_host_bytes'])} host"
    if mem.get("peak_device_bytes"):
        text += f", {fmt_bytes(mem['peak_device_bytes'])} GPU"
    return text


def render_one(result: dict[str, Any]) -> Group:
    """One problem: the verdict on the main inputs, what passes, what moves the output, notes, advice."""
    status = result.get("status", "ok")
    if status != "ok":
        head = Text(f"audit not done ({_FAILED.get(status, status)}): {result.get('error', '')}", style="bold red")
        return Group(Text(str(result.get("problem", ""))), head)
    table = Table(box=None, show_header=False)
    table.add_row("problem", str(result.get("problem")))
    yes = Text("yes (main inputs)", style="bold red")
    table.add_row("degenerate", yes if result["degenerate"] else Text("no", style="green"))
    tol = result.get("tolerance") or {}
    table.add_row("tolerance", tol.get("description", tol.get("name", "")))
    table.add_row("trivial answers that pass", ", ".join(result["trivial_answers_that_pass"]) or "none")
    table.add_row("output variation", _variation(result.get("variation")))
    for note in result.get("notes", []):
        table.add_row("note", note)
    mem = _memory(result.get("memory"))
    if mem:
        table.add_row("memory", Text(mem, style="dim"))
    table.add_row("advice", result.get("advice", ""))
    return Group(table)


def render_audit_folder(doc: dict[str, Any]) -> Group:
    """A folder: counts, the degenerate problems with what passes, and the ones that could not be audited."""
    s = doc["summary"]
    counts = ", ".join(f"{n} {k}" for k, n in sorted(s["by_status"].items()))
    lines: list[Any] = [Text(f"{s['problems']} problems under {doc['root']}: {counts}; "
                             f"{s['degenerate']} degenerate ({doc['settings']['tolerance']['name']} tolerance)",
                             style="bold")]
    if s["flagged"]:
        table = Table(title="degenerate (main inputs)", header_style="bold", title_justify="left")
        for col in ("problem", "trivial answers that pass", "new inputs", "new parameters"):
            table.add_column(col, overflow="fold")
        for f in s["flagged"]:
            var = f.get("variation") or {}
            table.add_row(f["problem"], ", ".join(f["trivial_answers_that_pass"]) or "(output barely varies)",
                          _num(var.get("inputs")), _num(var.get("parameters")))
        lines.append(table)
    if s["not_audited"]:
        table = Table(title="not audited", header_style="bold", title_justify="left")
        for col in ("problem", "why", "message"):
            table.add_column(col, overflow="fold")
        for f in s["not_audited"]:
            table.add_row(f["problem"], _FAILED.get(f["status"], str(f["status"])), (f.get("error") or "")[:200])
        lines.append(table)
    if s["edge_case_notes"]:
        lines.append(Text(f"{len(s['edge_case_notes'])} problem(s) have a degenerate test input set (a note, "
                          "not a verdict); see the results file", style="dim"))
    return Group(*lines)


class AuditProgress:
    """A live bar for a folder audit: done of total, flagged and failed counts, the problems running now."""

    def __init__(self, console: Console):
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=False)
        self.task = self.progress.add_task("auditing", total=None)
        self.running: list[str] = []
        self.flagged = self.failed = 0
        self.out = ""

    def __enter__(self) -> AuditProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)
        if self.out:
            self.progress.console.print(Text(f"results: {self.out}", style="dim"))

    def update(self, event: str, info: dict[str, Any]) -> None:
        if event == "start":
            self.out = info["out"]
            done = info["total"] - info["todo"]
            self.progress.update(self.task, total=info["total"], completed=done)
        elif event == "begin":
            self.running.append(info["problem"])
        elif event == "done":
            if info["problem"] in self.running:
                self.running.remove(info["problem"])
            result = info["result"]
            self.flagged += bool(result.get("degenerate"))
            self.failed += result.get("status") != "ok"
            self.progress.advance(self.task)
        now = ", ".join(self.running[:3]) + (" ..." if len(self.running) > 3 else "")
        self.progress.update(self.task, description=f"flagged {self.flagged} · not audited {self.failed} · {now}")
