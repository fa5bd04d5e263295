"""What every command shares: the consoles, the one exit-code table, option types, and `fail`.

Exit codes (also in `kernelagent --help` and the README):
0 accepted / success · 1 rejected, or nothing found · 2 usage or input error · 3 internal error ·
4 compiled but not verified (no GPU: a CuTe DSL kernel was never run) · 130 interrupted.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import Annotated

import typer
from rich.console import Console

console = Console(stderr=False)
err = Console(stderr=True)


class ExitCode(IntEnum):
    OK = 0            # accepted, or the command did what was asked
    REJECTED = 1      # a candidate was rejected, or nothing was found
    INPUT = 2         # a usage error or a bad input file (the user's to fix)
    INTERNAL = 3      # kernelagent itself failed
    UNVERIFIED = 4    # compiled but never run (no GPU): neither accepted nor rejected
    INTERRUPTED = 130  # Ctrl-C


EXIT_CODES_HELP = ("Exit codes: 0 accepted / success, 1 rejected or nothing found, 2 usage or input error, "
                   "3 internal error, 4 compiled but not verified (no GPU to run it), 130 interrupted.")


class Device(StrEnum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class Confinement(StrEnum):
    auto = "auto"        # the strongest the machine allows; the report warns when a layer is missing
    strict = "strict"    # refuse to run without namespaces, Landlock and seccomp
    off = "off"          # Python-level tripwires only (tests of the layers alone)


class Backend(StrEnum):
    triton = "triton"
    cute = "cute"


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document instead of tables.")]
DeviceOpt = Annotated[Device, typer.Option(help="Where to run: auto picks the GPU when there is one.")]
ConfinementOpt = Annotated[Confinement, typer.Option(
    help="OS walls around the candidate's processes: auto (strongest available, warns when a layer is missing), "
         "strict (refuse without them), off.")]


def fail(message: str, code: ExitCode = ExitCode.INPUT) -> typer.Exit:
    """Print one error line and return the Exit to raise (never a traceback for the user's mistakes)."""
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(int(code))


def verify_options(device: Device | str, seeds: int = 3, timeout: float = 300.0, timing: bool = True,
                   **extra: object):
    """VerifyOptions from CLI values, with the checks typer cannot express."""
    from kernelagent.verifier.options import VerifyOptions

    if seeds < 1:
        raise fail("--seeds must be at least 1")
    if timeout <= 0:
        raise fail("--timeout must be positive")
    value = device.value if isinstance(device, Device) else str(device)
    extra = {k: (v.value if isinstance(v, StrEnum) else v) for k, v in extra.items()}
    return VerifyOptions(device=value, seeds=seeds, timeout=timeout, timing=timing, **extra)


def exit_for_report(report) -> ExitCode:  # noqa: ANN001 - a verifier Report
    """The exit code a verification report maps to."""
    if report.accepted:
        return ExitCode.OK
    if report.unverified:
        return ExitCode.UNVERIFIED
    if report.blame == "problem":
        return ExitCode.INPUT
    return ExitCode.INTERNAL if report.category == "internal_error" else ExitCode.REJECTED


def exit_for_verdicts(verdicts: list[str]) -> ExitCode:
    """One code for several verifications: 1 when any was rejected, else 4 when any is unverified, else 0."""
    if any(v not in ("accepted", "unverified") for v in verdicts):
        return ExitCode.REJECTED
    return ExitCode.UNVERIFIED if "unverified" in verdicts else ExitCode.OK
