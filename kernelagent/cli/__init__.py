"""The `kernelagent` command line (typer app, terminal rendering, exit codes)."""

from kernelagent.cli.app import app, main

__all__ = ["app", "main"]
