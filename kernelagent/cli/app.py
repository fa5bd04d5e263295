"""The `kernelagent` command line: the root app, composed from one module per command group.

Each module parses its options and calls into the packages; rendering lives in this package too.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from kernelagent.cli import audit, batch, cache, daemon, history, library, mcp, optimize, report, verify
from kernelagent.cli.common import EXIT_CODES_HELP, ExitCode, err

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Turn a PyTorch reference into a fast, verified Triton or CuTe DSL kernel.",
                  epilog=EXIT_CODES_HELP)


def _print_version(value: bool) -> None:
    if value:
        from kernelagent import __version__
        print(f"kernelagent {__version__}")
        raise typer.Exit()


@app.callback()
def root(version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                               help="Print the version and exit.")] = False) -> None:
    """Turn a PyTorch reference into a fast, verified Triton or CuTe DSL kernel."""


# --- registration: one line per command or command group -------------------------------------------
app.command()(verify.verify)
app.command()(audit.audit)
app.command()(verify.doctor)
app.command()(optimize.optimize)
app.add_typer(library.app, name="library")
app.add_typer(history.app, name="history")
app.command()(batch.batch)
app.command()(report.report)
app.add_typer(cache.app, name="cache")
app.command()(mcp.mcp)
app.add_typer(daemon.app, name="daemon")
# --- end of registration ------------------------------------------------------------------------------


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(int(ExitCode.INTERRUPTED))
