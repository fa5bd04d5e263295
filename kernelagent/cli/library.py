"""The `library` commands: list, show, verify, add."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from kernelagent.cli.common import Device, DeviceOpt, ExitCode, JsonOpt, console, err, verify_options
from kernelagent.kernels import LibraryError, get_entry, list_entries
from kernelagent.tools.library import add_entry, entry_summary, verify_entry

EXIT_OK, EXIT_REJECTED, EXIT_INPUT = ExitCode.OK, ExitCode.REJECTED, ExitCode.INPUT


def list_cmd(json_out: bool, console: Any) -> None:
    entries = [entry_summary(e) for e in list_entries()]
    if json_out:
        print(json.dumps(entries, indent=2))
        return
    table = Table(box=None)
    for col in ("name", "backends", "dtypes", "verified on", "summary"):
        table.add_column(col, overflow="fold")
    for e in entries:
        verified = ", ".join(sorted({str(v.get("device")) for v in e["verified"]})) or "not yet on a GPU"
        table.add_row(e["name"], ", ".join(e["backends"]), ", ".join(e["dtypes"]), verified, e["summary"][:90])
    console.print(table)


def show_cmd(name: str, json_out: bool, console: Any, err: Any) -> int:
    try:
        entry = get_entry(name)
    except LibraryError as e:
        err.print(f"[bold red]error:[/] {e}")
        return EXIT_INPUT
    if json_out:
        print(json.dumps({**entry_summary(entry), "card": entry.card,
                          "files": {b: str(p) for b, p in entry.backends.items()}}, indent=2))
        return EXIT_OK
    md = entry.path / "card.md"
    console.print(md.read_text() if md.exists() else json.dumps(entry.card, indent=2))
    for backend, path in entry.backends.items():
        console.print(f"[dim]{backend}: {path}[/]")
    return EXIT_OK


def verify_cmd(name: str | None, json_out: bool, options: Any, console: Any, err: Any) -> int:
    from kernelagent.verifier.api import Verifier
    from kernelagent.verifier.sandbox.pool import WorkerPool

    try:
        entries = [get_entry(name)] if name else list_entries()
    except LibraryError as e:
        err.print(f"[bold red]error:[/] {e}")
        return EXIT_INPUT
    rows, ok = [], True
    with Verifier(options, pool=WorkerPool(size=1)) as v:
        for entry in entries:
            for backend in sorted(entry.backends):
                with console.status(f"verifying {entry.name} ({backend}) ..."):
                    report = verify_entry(entry, backend, v)
                ok &= report.accepted
                rows.append({"name": entry.name, "backend": backend, "verdict": report.verdict,
                             "category": report.category, "message": report.message,
                             "metrics": report.metrics, "environment": report.environment})
    if json_out:
        print(json.dumps(rows, indent=2, default=str))
    else:
        table = Table(box=None)
        for col in ("entry", "backend", "verdict", "note"):
            table.add_column(col, overflow="fold")
        for r in rows:
            style = "green" if r["verdict"] == "accepted" else "bold red"
            table.add_row(r["name"], r["backend"], f"[{style}]{r['verdict']}[/]", r["message"][:100])
        console.print(table)
    return EXIT_OK if ok else EXIT_REJECTED


def add_cmd(kernel: Path, ref: Path, name: str, summary: str, options: Any, json_out: bool, console: Any,
            err: Any) -> int:
    from kernelagent.verifier.api import Verifier

    try:
        with Verifier(options) as v:
            report, folder = add_entry(kernel, ref, name, v, summary)
    except LibraryError as e:
        err.print(f"[bold red]error:[/] {e}")
        return EXIT_INPUT
    if json_out:
        print(json.dumps({"added": str(folder) if folder else None, "report": report.to_dict()}, default=str))
    elif folder:
        console.print(f"[green]added[/] {name} at {folder}")
    else:
        from kernelagent.cli.render import render_report
        console.print(render_report(report))
        err.print("not added: the kernel was rejected")
    return EXIT_OK if folder else EXIT_REJECTED


app = typer.Typer(no_args_is_help=True, help="The curated kernel library.")


@app.command("list")
def library_list(json_out: JsonOpt = False) -> None:
    """List the library's entries."""
    list_cmd(json_out, console)


@app.command("show")
def library_show(name: str, json_out: JsonOpt = False) -> None:
    """Show an entry's card and files."""
    raise typer.Exit(int(show_cmd(name, json_out, console, err)))


@app.command("verify")
def library_verify(
    name: Annotated[str | None, typer.Argument(help="Entry to verify (default: all).")] = None,
    json_out: JsonOpt = False,
    device: DeviceOpt = Device.auto,
    seeds: Annotated[int, typer.Option(help="Fresh seeds for the correctness trials.")] = 3,
) -> None:
    """Verify library kernels against their own references with the same verifier as generated ones."""
    raise typer.Exit(int(verify_cmd(name, json_out, verify_options(device, seeds), console, err)))


@app.command("add")
def library_add(
    kernel: Path, ref: Annotated[Path, typer.Option("--ref", help="Problem file the kernel implements.")],
    name: Annotated[str, typer.Option(help="Entry name (lowercase, digits, underscores).")],
    summary: Annotated[str, typer.Option(help="One line for the card.")] = "",
    device: DeviceOpt = Device.auto,
    json_out: JsonOpt = False,
) -> None:
    """Verify a kernel and, if accepted, add it to the library with a card."""
    raise typer.Exit(int(add_cmd(kernel, ref, name, summary, verify_options(device), json_out, console, err)))
