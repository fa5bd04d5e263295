"""The `history` commands: attempts, runs, batches, LLM exchanges, full-text search, one attempt, export
(rendering in cli.history_render). Ids are accepted by unique prefix everywhere."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from typing import Annotated, Any

import typer

from kernelagent.cli.common import ExitCode, JsonOpt, console, err, fail

EXIT_OK, EXIT_NOT_FOUND, EXIT_INPUT = ExitCode.OK, ExitCode.REJECTED, ExitCode.INPUT


def _store() -> Any:
    from kernelagent.memory import open_store
    return open_store()


def _json(rows: Any) -> None:
    print(json.dumps(rows, indent=2, default=str))


def list_cmd(problem: str | None, json_out: bool, limit: int, console: Any, err: Any) -> int:
    from kernelagent.cli.history_render import history_table

    store = _store()
    rows = store.history(problem, limit=limit)
    if json_out:
        _json(rows)
    elif not rows:
        err.print("no attempts recorded" + (f" for {problem!r}" if problem else "")
                  + " (they are written by `kernelagent optimize`, `verify` and `batch`)")
    else:
        console.print(history_table(store, problem, limit, width=console.width))
    return EXIT_OK if rows or not problem else EXIT_NOT_FOUND


def show_cmd(attempt_id: str, json_out: bool, console: Any, err: Any) -> int:
    from kernelagent.cli.history_render import AttemptNotFoundError, attempt_detail
    from kernelagent.memory.store import AmbiguousIdError

    store = _store()
    try:
        if json_out:
            row = store.attempt(attempt_id)
            if row is None:
                raise AttemptNotFoundError(f"no attempt {attempt_id!r}")
            _json(row)
        else:
            console.print(attempt_detail(store, attempt_id))
    except (AttemptNotFoundError, AmbiguousIdError) as e:
        err.print(f"[bold red]error:[/] {e}")
        return EXIT_NOT_FOUND
    return EXIT_OK


def runs_cmd(problem: str | None, kind: str | None, batch: str | None, json_out: bool, limit: int) -> int:
    from kernelagent.cli.history_render import runs_table
    from kernelagent.memory.store import AmbiguousIdError

    store = _store()
    try:
        batch_id = store.resolve_id("batches", batch) if batch else None
    except AmbiguousIdError as e:
        raise fail(str(e)) from e
    if batch and batch_id is None:
        raise fail(f"no batch {batch!r}", ExitCode.REJECTED)
    rows = store.runs(limit, kind=kind, batch_id=batch_id, problem=problem)
    if json_out:
        _json(rows)
    elif rows:
        console.print(runs_table(rows, width=console.width))
    else:
        err.print("no runs recorded")
    return EXIT_OK


def search_cmd(text: str, json_out: bool, limit: int) -> int:
    from kernelagent.cli.history_render import search_table

    rows = _store().search(text, limit)
    if json_out:
        _json(rows)
    elif rows:
        console.print(search_table(rows, text))
    else:
        err.print(f"nothing matches {text!r}")
    return EXIT_OK if rows else EXIT_NOT_FOUND


def logs_cmd(run: str | None, json_out: bool, limit: int) -> int:
    from kernelagent.cli.history_render import exchanges_table

    rows = _store().exchanges(run, limit)
    if json_out:
        _json(rows)
    elif rows:
        console.print(exchanges_table(rows))
    else:
        err.print("no LLM exchanges recorded" + (f" for run {run!r}" if run else ""))
    return EXIT_OK if rows or not run else EXIT_NOT_FOUND


def batches_cmd(json_out: bool, limit: int) -> int:
    from rich.table import Table

    from kernelagent.memory.batches import batches

    rows = batches(_store(), limit)
    if json_out:
        _json(rows)
        return EXIT_OK
    table = Table(title="batches", header_style="bold", pad_edge=False)
    for name in ("batch", "mode", "status", "items", "started"):
        table.add_column(name, min_width=len(name), no_wrap=True)
    for r in rows:
        table.add_row(r["id"][:8], r["mode"], r["status"], str(r["items"]), (r["started"] or "")[:16].replace("T", " "))
    console.print(table)
    return EXIT_OK


class ExportTable(StrEnum):
    attempts = "attempts"
    runs = "runs"
    exchanges = "exchanges"
    batches = "batches"


app = typer.Typer(help="Every verified attempt, run, batch and LLM exchange, from SQLite "
                  "($KERNELAGENT_HOME/kernelagent.db; also readable with sqlite-utils or Datasette).",
                  invoke_without_command=True)
LimitOpt = Annotated[int, typer.Option("--limit", "-n", min=1, help="Most rows to list.")]


@app.callback()
def history_default(ctx: typer.Context, json_out: JsonOpt = False, limit: LimitOpt = 50) -> None:
    """With no subcommand: list the latest attempts."""
    if ctx.invoked_subcommand is None:
        raise typer.Exit(int(list_cmd(None, json_out, limit, console, err)))


@app.command("list")
def history_list(problem: Annotated[str | None, typer.Argument(help="Only this problem (name).")] = None,
                 json_out: JsonOpt = False, limit: LimitOpt = 50) -> None:
    """List attempts, newest first."""
    raise typer.Exit(int(list_cmd(problem, json_out, limit, console, err)))


@app.command("show")
def history_show(attempt: Annotated[str, typer.Argument(help="Attempt id (a unique prefix is enough).")],
                 json_out: JsonOpt = False) -> None:
    """One attempt: its source, verdict and feedback."""
    raise typer.Exit(int(show_cmd(attempt, json_out, console, err)))


@app.command("runs")
def history_runs(problem: Annotated[str | None, typer.Argument(help="Only this problem (name).")] = None,
                 kind: Annotated[str | None, typer.Option(help="optimize or verify.")] = None,
                 batch: Annotated[str | None, typer.Option(help="Only the runs of this batch (id prefix).")] = None,
                 json_out: JsonOpt = False, limit: LimitOpt = 20) -> None:
    """List runs (optimize runs and verifications), newest first."""
    raise typer.Exit(int(runs_cmd(problem, kind, batch, json_out, limit)))


@app.command("batches")
def history_batches(json_out: JsonOpt = False, limit: LimitOpt = 20) -> None:
    """List batches, newest first."""
    raise typer.Exit(int(batches_cmd(json_out, limit)))


@app.command("logs")
def history_logs(run: Annotated[str | None, typer.Argument(help="Only this run (id prefix).")] = None,
                 json_out: JsonOpt = False, limit: LimitOpt = 20) -> None:
    """LLM prompts and replies, newest first."""
    raise typer.Exit(int(logs_cmd(run, json_out, limit)))


@app.command("search")
def history_search(text: Annotated[str, typer.Argument(help="Words to find (all of them must occur).")],
                   json_out: JsonOpt = False, limit: LimitOpt = 20) -> None:
    """Full-text search over attempts' feedback, messages and sources, and LLM prompts and replies."""
    raise typer.Exit(int(search_cmd(text, json_out, limit)))


@app.command("export")
def history_export(problem: Annotated[str | None, typer.Argument(help="Only this problem (name).")] = None,
                   table: Annotated[ExportTable, typer.Option(help="What to export.")] = ExportTable.attempts,
                   fmt: Annotated[str, typer.Option("--format", help="Export format.")] = "jsonl") -> None:
    """Rows as JSON lines on stdout (attempts by default)."""
    from kernelagent.cli.history_render import export_jsonl

    if fmt != "jsonl":
        raise fail("only --format jsonl is supported")
    n = export_jsonl(_store(), sys.stdout, problem, table.value)
    err.print(f"{n} {table.value[:-1] if n == 1 else table.value} exported")
    raise typer.Exit(int(EXIT_OK))
