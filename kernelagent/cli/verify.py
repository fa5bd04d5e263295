"""`verify` and `doctor`: the verifier's commands (`audit` is in cli/audit.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from kernelagent.cli.common import (
    Confinement,
    ConfinementOpt,
    Device,
    DeviceOpt,
    JsonOpt,
    console,
    err,
    exit_for_report,
    fail,
    verify_options,
)
from kernelagent.cli.daemon import DaemonMode, DaemonOpt, served_verify


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
    confinement: ConfinementOpt = Confinement.auto,
    cache: Annotated[bool, typer.Option(help="Reuse the problem's reference pack across runs.")] = True,
    daemon: DaemonOpt = DaemonMode.auto,
) -> None:
    """Verify a candidate kernel against a reference problem."""
    _existing(kernel, "candidate file")
    _existing(ref, "problem file")
    opts = verify_options(device, seeds, timeout, timing, keep_workdir=keep, profile=profile, sanitize=sanitize,
                          confinement=confinement, cache=cache)
    served = served_verify(ref, kernel, opts, daemon, json_out)  # never imports torch
    if served is not None:
        _show(ref, kernel, served.report, json_out, f"served by the verifier daemon (pid {served.pid}); "
                                                    f"stop it with `{served.stop_hint}`")
    report = _verify_here(ref, kernel, opts, json_out)
    _show(ref, kernel, report, json_out)


def _verify_here(ref: Path, kernel: Path, opts, json_out: bool):  # noqa: ANN001, ANN202 - VerifyOptions, Report
    """The verification in this process (no daemon)."""
    pool = _early_worker(opts)  # before this process imports torch: the worker's imports run meanwhile
    from kernelagent.verifier.api import verify as run_verify
    from kernelagent.verifier.sandbox.confine import ConfinementError

    try:
        if json_out:
            report = run_verify(ref, kernel, opts, pool=pool)
        else:
            with console.status("verifying ...") as status:
                report = run_verify(ref, kernel, opts, progress=lambda m: status.update(m), pool=pool)
    except ConfinementError as e:
        raise fail(f"{e} (--confinement strict refuses to run without it)") from e
    except ValueError as e:
        raise fail(str(e)) from e
    finally:
        if pool is not None:
            pool.close()  # the early worker too when the verifier never started (bad options)
    return report


def _show(ref: Path, kernel: Path, report, json_out: bool, served: str = "") -> NoReturn:  # noqa: ANN001 - a Report
    """Record, print, and exit with the report's code (the same wherever the report was made)."""
    from kernelagent.cli.render import render_report
    from kernelagent.verifier.api import report_json

    note = _log(ref, kernel, report)
    if json_out:
        print(report_json(report))
    else:
        console.print(render_report(report))
        if note:
            err.print(note, highlight=False)
        if served:
            err.print(f"[dim]{served}[/]", highlight=False)
    raise typer.Exit(int(exit_for_report(report)))


def _early_worker(opts):  # noqa: ANN001, ANN202 - VerifyOptions in, WorkerPool (or None) out
    """A pool with the candidate's worker already starting (not under a profiler or sanitizer, whose
    workers start under their tool)."""
    from kernelagent.verifier.sandbox.confine import ConfinementError
    from kernelagent.verifier.sandbox.pool import WorkerPool

    if opts.profile or opts.sanitize:
        return None
    from kernelagent.verifier.api import likely_device

    pool = WorkerPool.for_options(opts, size=0)
    try:
        pool.prestart(likely_device(opts.device))
    except (ConfinementError, OSError):
        return None  # the verify itself will say what is wrong, in its own words
    return pool


def _log(ref: Path, kernel: Path, report) -> str:  # noqa: ANN001 - a verifier Report
    """Record the verification in the history (never fatal: the report is the result)."""
    import sqlite3

    try:
        from kernelagent.memory.batches import log_verify
        from kernelagent.memory.db import StoreError
    except ImportError as e:  # a bare GPU image without the store's packages: verifying still works
        return f"note: not recorded in history ({e})"
    try:
        log_verify(ref, kernel, report)
    except (StoreError, sqlite3.Error, OSError) as e:
        return f"note: not recorded in history ({type(e).__name__}: {e})"
    return ""


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
