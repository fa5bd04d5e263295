"""The `kernelagent` command line: the root app, composed from one module per command group.

Each module parses its options and calls into the packages; rendering lives in this package too.
"""

from __future__ import annotations

import sys

import typer

from kernelagent.cli import history, library, optimize, verify
from kernelagent.cli.common import EXIT_CODES_HELP, ExitCode, err

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Turn a PyTorch reference into a fast, verified Triton or CuTe DSL kernel.",
                  epilog=EXIT_CODES_HELP)

# --- registration: one line per command or command group -------------------------------------------
app.command()(verify.verify)
app.command()(verify.audit)
app.command()(verify.doctor)
app.command()(optimize.optimize)
app.add_typer(library.app, name="library")
app.add_typer(history.app, name="history")
# --- end of registration ------------------------------------------------------------------------------


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(int(ExitCode.INTERRUPTED))
