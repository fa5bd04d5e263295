"""The `kernelagent` command line: parses options, calls the packages, renders results.

Exit codes: 0 success (kernel accepted), 1 rejected / not found, 2 usage or input error,
3 internal error, 130 interrupted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Turn a PyTorch reference into a fast, verified Triton or CuTe DSL kernel.")
console = Console(stderr=False)
err = Console(stderr=True)

EXIT_OK, EXIT_REJECTED, EXIT_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document instead of tables.")]


def _fail(message: str, code: int = EXIT_INPUT) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}")
    return typer.Exit(code)


def _exit_for(report) -> int:  # noqa: ANN001 - a verifier Report
    if report.accepted:
        return EXIT_OK
    if report.blame == "problem":
        return EXIT_INPUT
    return EXIT_INTERNAL if report.category == "internal_error" else EXIT_REJECTED


def _options(device: str, seeds: int, timeout: float, timing: bool, **extra):  # noqa: ANN003
    from kernelagent.verifier.options import VerifyOptions

    if device not in ("auto", "cpu", "cuda"):
        raise _fail(f"--device must be auto, cpu or cuda (got {device!r})")
    if seeds < 1:
        raise _fail("--seeds must be at least 1")
    if timeout <= 0:
        raise _fail("--timeout must be positive")
    return VerifyOptions(device=device, seeds=seeds, timeout=timeout, timing=timing, **extra)


@app.command()
def verify(
    kernel: Annotated[Path, typer.Argument(help="Candidate file defining ModelNew.")],
    ref: Annotated[Path, typer.Option("--ref", help="Problem file (KernelBench format).")],
    json_out: JsonOpt = False,
    timeout: Annotated[float, typer.Option(help="Wall-clock limit per worker, seconds.")] = 300.0,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    seeds: Annotated[int, typer.Option(help="Fresh seeds for the correctness trials.")] = 3,
    timing: Annotated[bool, typer.Option(help="Time candidate and baselines (GPU only).")] = True,
    keep: Annotated[bool, typer.Option(help="Keep the workers' directories for inspection.")] = False,
    profile: Annotated[bool, typer.Option(help="Nsight Compute metrics on every kernel (GPU).")] = False,
    sanitize: Annotated[bool, typer.Option(help="compute-sanitizer memcheck + racecheck (GPU).")] = False,
) -> None:
    """Verify a candidate kernel against a reference problem."""
    from kernelagent.verifier.api import report_json
    from kernelagent.verifier.api import verify as run_verify

    opts = _options(device, seeds, timeout, timing, keep_workdir=keep, profile=profile, sanitize=sanitize)
    try:
        if json_out:
            report = run_verify(ref, kernel, opts)
        else:
            with console.status("verifying ...") as status:
                report = run_verify(ref, kernel, opts, progress=lambda m: status.update(m))
    except ValueError as e:
        raise _fail(str(e)) from e
    if json_out:
        print(report_json(report))
    else:
        from kernelagent.verifier.render import render_report
        console.print(render_report(report))
    raise typer.Exit(_exit_for(report))


@app.command()
def audit(
    op: Annotated[Path, typer.Argument(help="Problem file to audit.")],
    json_out: JsonOpt = False,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    seeds: Annotated[int, typer.Option(help="Seeds to compare the output across.")] = 3,
) -> None:
    """Check whether a problem is degenerate (would zeros, a constant, the identity pass?)."""
    from kernelagent.verifier.audit import audit_problem, render_audit

    opts = _options(device, seeds, 300.0, False)
    try:
        result = audit_problem(op, opts)
    except ValueError as e:
        raise _fail(str(e)) from e
    if json_out:
        print(json.dumps(result, indent=2, default=str))
    else:
        console.print(render_audit(result))
    if result.get("error"):
        raise typer.Exit(EXIT_INPUT)
    raise typer.Exit(EXIT_REJECTED if result["degenerate"] else EXIT_OK)


@app.command()
def doctor(
    measure: Annotated[bool, typer.Option("--measure", help="Measure and cache this GPU's ceilings.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Show the GPU, versions, profilers, provider settings and ceilings (API keys are never printed)."""
    from kernelagent.tools.doctor import collect, render

    info = collect(measure=measure)
    if json_out:
        print(json.dumps(info, indent=2, default=str))
    else:
        console.print(render(info))


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
