"""`audit`: is a problem (or every problem in a folder) degenerate, so that a trivial answer passes?

Exit codes: 0 not degenerate; 1 degenerate (any, for a folder); 2 a problem that cannot be audited (a bad
file, too large for this machine, out of memory, too slow) or a usage error; 3 kernelagent failed.
"""

from __future__ import annotations

import json
import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from kernelagent.cli.common import Device, DeviceOpt, ExitCode, JsonOpt, console, err, fail

USER_FAULTS = ("error", "refused", "oom", "timeout")


class TolName(StrEnum):
    ours = "ours"
    kernelbench = "kernelbench"
    kernelbench_fp32 = "kernelbench-fp32"


def audit(
    path: Annotated[Path, typer.Argument(help="Problem file, or a folder of them (e.g. KernelBench's levels).")],
    json_out: JsonOpt = False,
    device: DeviceOpt = Device.auto,
    seeds: Annotated[int, typer.Option(help="Input draws per input set (at least 2).")] = 3,
    tolerance: Annotated[TolName, typer.Option(help="Which check a trivial answer must pass: ours, or "
                                                    "KernelBench's allclose (1e-2; -fp32: 1e-4).")] = TolName.ours,
    atol: Annotated[float | None, typer.Option(help="Explicit atol (allclose, like KernelBench).")] = None,
    rtol: Annotated[float | None, typer.Option(help="Explicit rtol (allclose, like KernelBench).")] = None,
    jobs: Annotated[int, typer.Option(help="Problems audited at once (folders).")] = 1,
    out: Annotated[Path | None, typer.Option(help="Results file for a folder (resumable); default under "
                                                  "$KERNELAGENT_HOME/audits/.")] = None,
    fresh: Annotated[bool, typer.Option(help="Ignore earlier results in the results file.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds for one problem's audit.")] = 600.0,
) -> None:
    """Check whether a problem is degenerate: would zeros, a constant, an input, a parameter or a memorised
    output pass, and how much do new inputs and new parameters change the output?"""
    from kernelagent.verifier.audit.problem import resolve_device
    from kernelagent.verifier.audit.settings import AuditSettings, tolerance_from

    if not path.exists():
        raise fail(f"{path} does not exist")
    if seeds < 2 or jobs < 1 or timeout <= 0:
        raise fail("--seeds must be at least 2, --jobs at least 1 and --timeout positive")
    try:
        tol = tolerance_from(tolerance.value, atol, rtol)
        dev = resolve_device(device.value)
    except ValueError as e:
        raise fail(str(e)) from e
    threads = max(1, (os.cpu_count() or 1) // jobs)
    settings = AuditSettings(device=dev, draws=seeds, tolerance=tol, timeout=timeout, threads=threads)
    if path.is_dir():
        _folder(path, settings, jobs, out, fresh, json_out)
    _single(path, settings, json_out)


def _single(path: Path, settings: Any, json_out: bool) -> None:
    from kernelagent.cli.render import render_audit
    from kernelagent.verifier.audit import audit_problem

    if json_out:
        result = audit_problem(path, settings=settings)
        print(json.dumps(result, indent=2, default=str))
    else:
        with err.status(f"auditing {path} ..."):
            result = audit_problem(path, settings=settings)
        console.print(render_audit(result))
    raise typer.Exit(int(_exit_code([result])))


def _folder(root: Path, settings: Any, jobs: int, out: Path | None, fresh: bool, json_out: bool) -> None:
    from kernelagent.cli.audit_render import AuditProgress, render_audit_folder
    from kernelagent.verifier.audit.folder import audit_folder

    try:
        if json_out:
            doc = audit_folder(root, settings, jobs, out, fresh)
        else:
            with AuditProgress(err) as progress:
                doc = audit_folder(root, settings, jobs, out, fresh, progress=progress.update)
    except ValueError as e:
        raise fail(str(e)) from e
    if json_out:
        print(json.dumps(doc, indent=2, default=str))
    else:
        console.print(render_audit_folder(doc))
    raise typer.Exit(int(_exit_code(list(doc["problems"].values()))))


def _exit_code(results: list[dict[str, Any]]) -> ExitCode:
    if any(r.get("degenerate") for r in results):
        return ExitCode.REJECTED
    if any(r.get("status") not in ("ok", *USER_FAULTS) for r in results):
        return ExitCode.INTERNAL
    if any(r.get("status") in USER_FAULTS for r in results):
        return ExitCode.INPUT
    return ExitCode.OK
