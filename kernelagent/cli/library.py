"""The `library` commands: list, show, match, verify, add, remove (the shipped shelf and the user's own)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markdown import Markdown
from rich.markup import escape
from rich.table import Table

from kernelagent.cli.common import (
    Device,
    DeviceOpt,
    ExitCode,
    JsonOpt,
    console,
    err,
    exit_for_report,
    exit_for_verdicts,
    fail,
    verify_options,
)
from kernelagent.kernels import LibraryError, get_entry, list_entries, user_root

EXIT_OK, EXIT_REJECTED, EXIT_INPUT = ExitCode.OK, ExitCode.REJECTED, ExitCode.INPUT


def list_cmd(json_out: bool, console: Any) -> None:
    from kernelagent.tools.library import entry_summary

    entries = [entry_summary(e) for e in list_entries()]
    if json_out:
        print(json.dumps(entries, indent=2))
        return
    table = Table(box=None)
    for col in ("name", "shelf", "backends", "dtypes", "vs eager (GPU)", "summary"):
        whole = col == "name"  # the word a reader looks up (`library show NAME`): never broken
        table.add_column(col, overflow="fold", no_wrap=whole)
    for e in entries:
        table.add_row(e["name"], e["origin"], ", ".join(e["backends"]), ", ".join(e["dtypes"]),
                      speedups(e["verified"]), escape(first_sentence(e["summary"])))
    console.print(table)
    console.print(f"[dim]your shelf: {user_root()}; `kernelagent library show NAME` for a card[/]")


def speedups(verified: list[dict[str, Any]]) -> str:
    """The card's measured speedups over eager per backend and GPU ('triton 2.07x (H200)'), from its verify rows;
    'not measured' where no GPU row has one."""
    best: dict[tuple[str, str], float] = {}
    for row in sorted(verified, key=lambda r: str(r.get("date", ""))):  # the latest measurement stands
        gpu, value = row.get("gpu"), row.get("speedup_eager")
        if gpu and isinstance(value, int | float):
            best[(str(row.get("backend", "?")), str(gpu).removeprefix("NVIDIA "))] = value
    return ", ".join(f"{b} {v:.3g}x ({g})" for (b, g), v in sorted(best.items())) or "not measured"


def first_sentence(text: str, limit: int = 110) -> str:
    """The summary's first sentence, cut at a word boundary with an ellipsis when longer than `limit`."""
    text = " ".join(text.split())
    end = re.search(r"[.;](\s|$)", text)
    sentence = text[:end.start()] if end else text
    if len(sentence) <= limit:
        return sentence
    return sentence[:limit].rsplit(" ", 1)[0].rstrip(",;") + " …"


def show_cmd(name: str, json_out: bool, console: Any, err: Any) -> int:
    from kernelagent.tools.library import entry_summary

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
    if md.exists():
        console.print(Markdown(md.read_text()))
    else:
        console.print(json.dumps(entry.card, indent=2), markup=False)
    console.print(f"[dim]measured against eager: {speedups(entry.card.get('verified', []))}[/]")
    for backend, path in entry.backends.items():
        console.print(f"[dim]{backend}: {path}[/]")
    return EXIT_OK


_VERDICT_STYLE = {"accepted": "green", "unverified": "yellow"}  # unverified: compiled, not run (no GPU)


def _verify_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(box=None)
    for col in ("entry", "shelf", "backend", "verdict", "ms", "vs eager", "drift / note"):
        table.add_column(col, overflow="fold")
    for r in rows:
        style = _VERDICT_STYLE.get(r["verdict"], "bold red")
        m = r.get("metrics") or {}
        note = "; ".join(r["drift"]) or (r["message"] if r["verdict"] != "accepted" else "")
        table.add_row(r["name"], r["origin"], r["backend"], f"[{style}]{r['verdict']}[/]",
                      _num(m.get("candidate_ms")), _num(m.get("speedup_eager"), "x"),
                      f"[yellow]{note}[/]" if r["drift"] else note[:100])
    return table


def _num(value: Any, unit: str = "") -> str:
    return "not measured" if value is None else f"{value:.3g}{unit}"


def verify_cmd(name: str | None, json_out: bool, options: Any, record: bool, source: Path | None,
               console: Any, err: Any) -> int:
    from kernelagent.tools import library as lib

    try:
        entries = [get_entry(name)] if name else list_entries()
        if source is not None:
            rows = _rows_from(source, name)
        else:
            rows = _reverify(entries, options, json_out, console)
        written = lib.record(rows) if record else []
    except LibraryError as e:
        raise fail(str(e)) from e
    if json_out:
        print(json.dumps(rows, indent=2, default=str))
    else:
        console.print(_verify_table(rows))
        unverified = sum(r["verdict"] == "unverified" for r in rows)
        if unverified:
            console.print(f"[yellow]{unverified} kernel(s) compiled but could not be run without a GPU: not "
                          "verified, and not recorded[/]")
        if written:
            console.print(f"recorded in the cards of: {', '.join(written)}")
    if any(r["drift"] for r in rows):
        return EXIT_REJECTED
    return exit_for_verdicts([r["verdict"] for r in rows])  # 4: some compiled but could not be run (no GPU)


def _reverify(entries: list[Any], options: Any, quiet: bool, console: Any) -> list[dict[str, Any]]:
    from kernelagent.tools.library import reverify
    from kernelagent.verifier.api import Verifier
    from kernelagent.verifier.sandbox.pool import WorkerPool

    with Verifier(options, pool=WorkerPool.for_options(options, size=1)) as v:
        if quiet:
            return reverify(entries, v)
        with console.status("verifying ...") as status:
            return reverify(entries, v, progress=status.update)


def _rows_from(path: Path, name: str | None) -> list[dict[str, Any]]:
    """Rows of an earlier `library verify --json` (e.g. from the GPU machine), to record without re-running."""
    try:
        rows = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise LibraryError(f"--from {path}: not a `library verify --json` output ({e})") from e
    if not isinstance(rows, list) or not all(isinstance(r, dict) and {"name", "verdict"} <= set(r) for r in rows):
        raise LibraryError(f"--from {path}: expected the list `library verify --json` prints")
    return [{**r, "drift": r.get("drift") or []} for r in rows if name is None or r["name"] == name]


def add_cmd(what: str, ref: Path | None, name: str | None, summary: str, options: Any, json_out: bool,
            console: Any, err: Any) -> int:
    from kernelagent.memory.store import AmbiguousIdError
    from kernelagent.problem import ProblemError
    from kernelagent.tools.library import add_entry, resolve_kernel
    from kernelagent.verifier.api import Verifier

    if ref is not None and not ref.is_file():
        raise fail(f"problem file {ref} does not exist")
    try:
        kernel = resolve_kernel(what, ref)
        entry_name = name or _default_name(kernel.reference)
        with Verifier(options) as v:
            if json_out:
                report, folder = add_entry(kernel, entry_name, v, summary)
            else:
                with console.status(f"verifying {what} on {kernel.reference.name}'s shapes ..."):
                    report, folder = add_entry(kernel, entry_name, v, summary)
    except (LibraryError, AmbiguousIdError, ProblemError) as e:
        raise fail(str(e).splitlines()[0]) from e
    if json_out:
        print(json.dumps({"added": str(folder) if folder else None, "name": entry_name,
                          "report": report.to_dict()}, default=str))
    elif folder:
        console.print(f"[green]added[/] {entry_name} at {folder}")
    else:
        from kernelagent.cli.render import render_report
        console.print(render_report(report))
        err.print("not added: the kernel compiled but could not be run without a GPU (not verified)"
                  if report.unverified else "not added: the kernel was rejected")
    return EXIT_OK if folder else exit_for_report(report)


def _default_name(reference: Path) -> str:
    from kernelagent.problem import problem_name

    name = re.sub(r"[^a-z0-9_]+", "_", problem_name(reference).lower()).strip("_")
    return name if re.fullmatch(r"[a-z].*", name or "") else f"k_{name}"


def match_cmd(op: Path, json_out: bool, options: Any, console: Any) -> int:
    from rich.markup import escape

    from kernelagent.problem import ProblemError, inspect_problem
    from kernelagent.tools.library import match_problem
    from kernelagent.tools.presets import options_text
    from kernelagent.verifier.api import Verifier

    try:
        inspect_problem(op)
        with Verifier(options) as v:
            results = match_problem(op, v)
    except (LibraryError, ProblemError) as e:
        raise fail(str(e).splitlines()[0]) from e
    if json_out:
        print(json.dumps(results, indent=2, default=str))
    else:
        table = Table(box=None)
        for col in ("entry", "shelf", "match", "why"):
            table.add_column(col, overflow="fold")
        for r in results:
            bound = escape(f" ({options_text(r['options'])})") if r["match"] and r.get("options") else ""
            table.add_row(r["name"], r.get("origin", ""), f"[green]yes[/]{bound}" if r["match"] else "no",
                          r.get("why", ""))
        console.print(table)
    return EXIT_OK if any(r["match"] for r in results) else EXIT_REJECTED


app = typer.Typer(no_args_is_help=True, help="The kernel library: the shipped shelf and your own "
                  "($KERNELAGENT_HOME/library).")


@app.command("list")
def library_list(json_out: JsonOpt = False) -> None:
    """List the entries of both shelves."""
    list_cmd(json_out, console)


@app.command("show")
def library_show(name: str, json_out: JsonOpt = False) -> None:
    """Show an entry's card and files."""
    raise typer.Exit(int(show_cmd(name, json_out, console, err)))


@app.command("match")
def library_match(
    op: Annotated[Path, typer.Argument(help="Problem file.")], json_out: JsonOpt = False,
    device: DeviceOpt = Device.auto,
) -> None:
    """Entries whose reference computes the same function as OP (run on the same inputs)."""
    if not op.is_file():
        raise fail(f"problem file {op} does not exist")
    raise typer.Exit(int(match_cmd(op, json_out, verify_options(device, 1), console)))


@app.command("verify")
def library_verify(
    name: Annotated[str | None, typer.Argument(help="Entry to verify (default: all).")] = None,
    json_out: JsonOpt = False,
    device: DeviceOpt = Device.auto,
    seeds: Annotated[int, typer.Option(help="Fresh seeds for the correctness trials.")] = 3,
    record: Annotated[bool, typer.Option("--record", help="Write the results into the cards' `verified` "
                                         "lists (your entries; shipped ones only in a source checkout).")] = False,
    source: Annotated[Path | None, typer.Option("--from", help="Take the results from a saved "
                                                "`library verify --json` output instead of verifying.")] = None,
) -> None:
    """Re-verify entries with the same verifier as generated kernels; flag drift from their cards."""
    raise typer.Exit(int(verify_cmd(name, json_out, verify_options(device, seeds), record, source, console, err)))


@app.command("add")
def library_add(
    what: Annotated[str, typer.Argument(help="A kernel file, or an attempt or run id (a prefix is enough).")],
    ref: Annotated[Path | None, typer.Option("--ref", help="Problem file the kernel implements "
                                             "(needed for a file; for ids the stored problem is used).")] = None,
    name: Annotated[str | None, typer.Option(help="Entry name (default: the problem's name).")] = None,
    summary: Annotated[str, typer.Option(help="One line for the card.")] = "",
    device: DeviceOpt = Device.auto,
    json_out: JsonOpt = False,
) -> None:
    """Re-verify a kernel on its problem's shapes and, if accepted, add it to your shelf with a full card."""
    raise typer.Exit(int(add_cmd(what, ref, name, summary, verify_options(device), json_out, console, err)))


@app.command("remove")
def library_remove(name: str, json_out: JsonOpt = False) -> None:
    """Remove one of your entries (shipped entries stay)."""
    from kernelagent.tools.library import remove_entry

    try:
        folder = remove_entry(name)
    except LibraryError as e:
        raise fail(str(e)) from e
    if json_out:
        print(json.dumps({"removed": str(folder)}))
    else:
        console.print(f"removed {name} ({folder})")
