"""The `history` commands: list attempts, show one, export them (rendering in cli.history_render)."""

from __future__ import annotations

import json
import sys
from typing import Any

EXIT_OK, EXIT_NOT_FOUND, EXIT_INPUT = 0, 1, 2


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
