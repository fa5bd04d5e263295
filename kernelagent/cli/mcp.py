"""`kernelagent mcp`: serve kernelagent's tools to an editor or coding agent over stdio (MCP)."""

from __future__ import annotations

from typing import Annotated

import typer

from kernelagent.cli.common import Device, DeviceOpt, ExitCode, fail


def mcp(
    device: DeviceOpt = Device.auto,
    workers: Annotated[int, typer.Option(min=0, max=16, help="Warm worker processes kept ready.")] = 2,
    record: Annotated[bool, typer.Option(help="Record every verification in kernelagent's history.")] = True,
) -> None:
    """Serve kernelagent to editors and coding agents: an MCP server on stdin/stdout.

    Tools: verify, audit, bench, profile, library_search, library_show, history, guide. Register it with
    `claude mcp add kernelagent -- kernelagent mcp` (Claude Code) or in .cursor/mcp.json (Cursor).
    """
    try:
        from kernelagent.tools.mcp_server import serve
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] == "mcp":
            raise fail("the `mcp` package is not installed: pip install 'mcp>=2.3,<3'") from e
        raise
    try:
        serve(device=device.value, workers=workers, record_attempts=record)
    except ValueError as e:   # --device cuda without a GPU, a bad KERNELAGENT_CACHE_MAX_GB
        raise fail(str(e)) from e
    except (BrokenPipeError, ConnectionResetError):
        _client_gone()
    except BaseExceptionGroup as group:  # the server's task groups: the client went away mid-reply
        if not all(isinstance(e, (BrokenPipeError, ConnectionResetError)) for e in _leaves(group)):
            raise
        _client_gone()
    raise typer.Exit(int(ExitCode.OK))


def _leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside (possibly nested) exception groups."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for e in error.exceptions for leaf in _leaves(e)]
    return [error]


def _client_gone() -> None:
    """The client closed our stdout: nothing is left to say to anyone; leave without a traceback (and without
    the interpreter's own complaint when it flushes the closed pipe at exit)."""
    import os
    import sys

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
