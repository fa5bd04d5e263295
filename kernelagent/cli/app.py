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
                  help="Turn a PyTorch reference into a fast, verified Triton or CuTe DSL kernel.",
                  epilog="Exit codes: 0 accepted / success, 1 rejected or nothing found, 2 usage or input error, "
                         "3 internal error, 130 interrupted.")
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
        from kernelagent.cli.render import render_report
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


@app.command()
def optimize(
    op: Annotated[Path | None, typer.Argument(help="Problem file (KernelBench format).")] = None,
    backend: Annotated[str, typer.Option(help="triton | cute")] = "triton",
    out: Annotated[Path | None, typer.Option(help="Where to write the best kernel (default: beside OP).")] = None,
    provider: Annotated[str | None, typer.Option(help="anthropic | openai | replay")] = None,
    model: Annotated[str | None, typer.Option(help="Model name (else $KERNELAGENT_MODEL, config, default).")] = None,
    base_url: Annotated[str | None, typer.Option(help="Provider endpoint (OpenAI-compatible servers).")] = None,
    script: Annotated[Path | None, typer.Option(help="JSONL script for --provider replay.")] = None,
    turns: Annotated[int, typer.Option(help="Most LLM turns.")] = 8,
    candidates: Annotated[int, typer.Option(help="Candidates per turn.")] = 4,
    beam: Annotated[int, typer.Option(help="Branches kept between turns.")] = 2,
    target_speedup: Annotated[float | None, typer.Option(help="Stop once this much faster than eager.")] = None,
    budget_usd: Annotated[float | None, typer.Option(help="Dollar budget for LLM calls.")] = 5.0,
    resume: Annotated[str | None, typer.Option(help="Continue an interrupted run by its id.")] = None,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    json_out: JsonOpt = False,
) -> None:
    """Write a fast, verified kernel for OP (offline: find a library kernel when no provider is set)."""
    from kernelagent.cli import optimize as cli_optimize

    if backend not in ("triton", "cute"):
        raise _fail("--backend must be triton or cute")
    if op is None and resume is None:
        raise _fail("give a problem file, or --resume RUN_ID")
    opts = _options(device, 3, 300.0, True)
    code = cli_optimize.run(op=op, backend=backend, out=out, provider=provider, model=model, base_url=base_url,
                            script=script, turns=turns, candidates=candidates, beam=beam,
                            target_speedup=target_speedup, budget_usd=budget_usd, resume=resume, options=opts,
                            json_out=json_out, console=console, err=err)
    raise typer.Exit(code)


library_app = typer.Typer(no_args_is_help=True, help="The curated kernel library.")
app.add_typer(library_app, name="library")


@library_app.command("list")
def library_list(json_out: JsonOpt = False) -> None:
    """List the library's entries."""
    from kernelagent.cli import library as cli_library

    cli_library.list_cmd(json_out, console)


@library_app.command("show")
def library_show(name: str, json_out: JsonOpt = False) -> None:
    """Show an entry's card and files."""
    from kernelagent.cli import library as cli_library

    raise typer.Exit(cli_library.show_cmd(name, json_out, console, err))


@library_app.command("verify")
def library_verify(
    name: Annotated[str | None, typer.Argument(help="Entry to verify (default: all).")] = None,
    json_out: JsonOpt = False,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    seeds: Annotated[int, typer.Option(help="Fresh seeds for the correctness trials.")] = 3,
) -> None:
    """Verify library kernels against their own references with the same verifier as generated ones."""
    from kernelagent.cli import library as cli_library

    raise typer.Exit(cli_library.verify_cmd(name, json_out, _options(device, seeds, 300.0, True), console, err))


@library_app.command("add")
def library_add(
    kernel: Path, ref: Annotated[Path, typer.Option("--ref", help="Problem file the kernel implements.")],
    name: Annotated[str, typer.Option(help="Entry name (lowercase, digits, underscores).")],
    summary: Annotated[str, typer.Option(help="One line for the card.")] = "",
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    json_out: JsonOpt = False,
) -> None:
    """Verify a kernel and, if accepted, add it to the library with a card."""
    from kernelagent.cli import library as cli_library

    opts = _options(device, 3, 300.0, True)
    raise typer.Exit(cli_library.add_cmd(kernel, ref, name, summary, opts, json_out, console, err))


@app.command(context_settings={"help_option_names": ["-h", "--help"]})
def history(
    args: Annotated[list[str] | None, typer.Argument(
        help="[PROBLEM] to list attempts | show ATTEMPT | export", show_default=False)] = None,
    json_out: JsonOpt = False,
    fmt: Annotated[str, typer.Option("--format", help="Export format (jsonl).")] = "jsonl",
    limit: Annotated[int, typer.Option(help="Most rows to list.")] = 50,
) -> None:
    """Every verified attempt: `history [PROBLEM]`, `history show ATTEMPT`, `history export --format jsonl`."""
    from kernelagent.cli import history as cli_history

    args = args or []
    if args[:1] == ["show"]:
        if len(args) != 2:
            raise _fail("usage: kernelagent history show ATTEMPT_ID")
        raise typer.Exit(cli_history.show_cmd(args[1], json_out, console, err))
    if args[:1] == ["export"]:
        if fmt != "jsonl":
            raise _fail("only --format jsonl is supported")
        raise typer.Exit(cli_history.export_cmd(args[1] if len(args) > 1 else None, err))
    if len(args) > 1:
        raise _fail("usage: kernelagent history [PROBLEM] | show ATTEMPT | export [PROBLEM]")
    raise typer.Exit(cli_history.list_cmd(args[0] if args else None, json_out, limit, console, err))


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
