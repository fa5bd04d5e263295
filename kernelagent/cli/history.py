"""The `history` commands: list attempts, show one, export them (rendering in cli.history_render)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from kernelagent.cli.common import ExitCode, JsonOpt, console, err, fail

EXIT_OK, EXIT_NOT_FOUND, EXIT_INPUT = ExitCode.OK, ExitCode.REJECTED, ExitCode.INPUT


def _store() -> Any:
    from kernelagent.memory import open_store
    return open_store()


def list_cmd(problem: str | None, json_out: bool, limit: int, console: Any, err: Any) -> int:
    from kernelagent.cli.history_render import history_table

    store = _store()
    rows = store.history(problem, limit=limit)
    if json_out:
        print(json.dumps(rows, indent=2, default=str))
    elif not rows:
        err.print("no attempts recorded" + (f" for {problem!r}" if problem else "")
                  + " (they are written by `kernelagent optimize`)")
    else:
        console.print(history_table(store, problem, limit))
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
            print(json.dumps(row, indent=2, default=str))
        else:
            console.print(attempt_detail(store, attempt_id))
    except (AttemptNotFoundError, AmbiguousIdError) as e:
        err.print(f"[bold red]error:[/] {e}")
        return EXIT_NOT_FOUND
    return EXIT_OK


def export_cmd(problem: str | None, err: Any) -> int:
    from kernelagent.cli.history_render import export_jsonl

    n = export_jsonl(_store(), sys.stdout, problem)
    err.print(f"{n} attempt(s) exported")
    return EXIT_OK


app = typer.Typer(help="Every verified attempt, from SQLite: `history`, `history list PROBLEM`, `history show ID`, "
                  "`history export`.", invoke_without_command=True)
LimitOpt = Annotated[int, typer.Option(min=1, help="Most rows to list.")]


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


@app.command("export")
def history_export(problem: Annotated[str | None, typer.Argument(help="Only this problem (name).")] = None,
                   fmt: Annotated[str, typer.Option("--format", help="Export format.")] = "jsonl") -> None:
    """Every attempt as JSON lines on stdout."""
    if fmt != "jsonl":
        raise fail("only --format jsonl is supported")
    raise typer.Exit(int(export_cmd(problem, err)))
