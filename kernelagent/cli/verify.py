"""`verify`, `audit` and `doctor`: the verifier's commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from kernelagent.cli.common import (
    Device,
    DeviceOpt,
    ExitCode,
    JsonOpt,
    console,
    exit_for_report,
    fail,
    verify_options,
)


def _existing(path: Path, what: str) -> Path:
    if not path.exists():
        raise fail(f"{what} {path} does not exist")
    if path.is_dir():
        raise fail(f"{what} {path} is a folder; give the .py file")
    return path


def verify(
    kernel: Annotated[Path, typer.Argument(help="Candidate file defining ModelNew.")],
    ref: Annotated[Path, typer.Option("--ref", help="Problem file (KernelBench format).")],
    json_out: JsonOpt = False,
    timeout: Annotated[float, typer.Option(help="Wall-clock limit per worker, seconds.")] = 300.0,
    device: DeviceOpt = Device.auto,
    seeds: Annotated[int, typer.Option(help="Fresh seeds for the correctness trials.")] = 3,
    timing: Annotated[bool, typer.Option(help="Time candidate and baselines (GPU only).")] = True,
    keep: Annotated[bool, typer.Option(help="Keep the workers' directories for inspection.")] = False,
    profile: Annotated[bool, typer.Option(help="Nsight Compute metrics on every kernel (GPU).")] = False,
    sanitize: Annotated[bool, typer.Option(help="compute-sanitizer memcheck + racecheck (GPU).")] = False,
) -> None:
    """Verify a candidate kernel against a reference problem."""
    from kernelagent.cli.render import render_report
    from kernelagent.verifier.api import report_json
    from kernelagent.verifier.api import verify as run_verify

    _existing(kernel, "candidate file")
    _existing(ref, "problem file")
    opts = verify_options(device, seeds, timeout, timing, keep_workdir=keep, profile=profile, sanitize=sanitize)
    try:
        if json_out:
            report = run_verify(ref, kernel, opts)
        else:
            with console.status("verifying ...") as status:
                report = run_verify(ref, kernel, opts, progress=lambda m: status.update(m))
    except ValueError as e:
        raise fail(str(e)) from e
    if json_out:
        print(report_json(report))
    else:
        console.print(render_report(report))
    raise typer.Exit(int(exit_for_report(report)))


def audit(
    op: Annotated[Path, typer.Argument(help="Problem file to audit.")],
    json_out: JsonOpt = False,
    device: DeviceOpt = Device.auto,
    seeds: Annotated[int, typer.Option(help="Seeds to compare the output across.")] = 3,
) -> None:
    """Check whether a problem is degenerate (would zeros, a constant, the identity pass?)."""
    from kernelagent.cli.render import render_audit
    from kernelagent.verifier.audit import audit_problem

    _existing(op, "problem file")
    opts = verify_options(device, seeds, 300.0, False)
    try:
        result = audit_problem(op, opts)
    except ValueError as e:
        raise fail(str(e)) from e
    if json_out:
        print(json.dumps(result, indent=2, default=str))
    else:
        console.print(render_audit(result))
    if result.get("error"):
        raise typer.Exit(int(ExitCode.INPUT))
    raise typer.Exit(int(ExitCode.REJECTED if result["degenerate"] else ExitCode.OK))


def doctor(
    measure: Annotated[bool, typer.Option("--measure", help="Measure and cache this GPU's ceilings.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Show the GPU, versions, profilers, provider settings and ceilings (API keys are never printed)."""
    from kernelagent.cli.render import render_doctor
    from kernelagent.tools.doctor import collect

    info = collect(measure=measure)
    if json_out:
        print(json.dumps(info, indent=2, default=str))
    else:
        console.print(render_doctor(info))
