"""The `report` command: one self-contained HTML page for a run or a batch."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kernelagent.cli.common import ExitCode, console, fail


def report(
    ident: Annotated[str, typer.Argument(metavar="RUN|BATCH", help="Run or batch id (a unique prefix is enough).")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="HTML file to write "
                                             "(default: kernelagent-<kind>-<id>.html here).")] = None,
) -> None:
    """Write an HTML report: progress per turn, speedups with intervals, roofline, the winning kernel;
    for a batch the fast_p table and the speedup distribution."""
    from kernelagent.memory import open_store
    from kernelagent.memory.store import AmbiguousIdError
    from kernelagent.report import ReportNotFoundError, render

    try:
        kind, full, html = render(open_store(), ident)
    except AmbiguousIdError as e:
        raise fail(str(e)) from e
    except ReportNotFoundError as e:
        raise fail(str(e), ExitCode.REJECTED) from e
    target = out or Path(f"kernelagent-{kind}-{full[:8]}.html")
    try:
        target.write_text(html, encoding="utf-8")
    except OSError as e:
        raise fail(f"cannot write {target}: {e.strerror}") from e
    console.print(f"wrote {target} ({kind} {full})")
