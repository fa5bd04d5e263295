"""The `optimize` command: the agent when a provider is configured, else the offline path."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from kernelagent.cli.common import Backend, Device, DeviceOpt, ExitCode, JsonOpt, console, err, fail, verify_options
from kernelagent.problem import ProblemError

EXIT_OK, EXIT_REJECTED, EXIT_INPUT = ExitCode.OK, ExitCode.REJECTED, ExitCode.INPUT
EXIT_INTERNAL, EXIT_INTERRUPTED = ExitCode.INTERNAL, ExitCode.INTERRUPTED


class Provider(StrEnum):
    anthropic = "anthropic"
    openai = "openai"
    replay = "replay"


def optimize(
    op: Annotated[Path | None, typer.Argument(help="Problem file (KernelBench format).")] = None,
    backend: Annotated[Backend, typer.Option(help="Kernel language to write.")] = Backend.triton,
    out: Annotated[Path | None, typer.Option(help="Where to write the best kernel (default: beside OP).")] = None,
    provider: Annotated[Provider | None, typer.Option(help="LLM provider (else config / environment).")] = None,
    model: Annotated[str | None, typer.Option(help="Model name (else $KERNELAGENT_MODEL, config, default).")] = None,
    base_url: Annotated[str | None, typer.Option(help="Provider endpoint (OpenAI-compatible servers).")] = None,
    script: Annotated[Path | None, typer.Option(help="JSONL script for --provider replay.")] = None,
    turns: Annotated[int, typer.Option(min=1, help="Most LLM turns.")] = 8,
    candidates: Annotated[int, typer.Option(min=1, help="Candidates per turn.")] = 4,
    beam: Annotated[int, typer.Option(min=1, help="Branches kept between turns.")] = 2,
    target_speedup: Annotated[float | None, typer.Option(help="Stop once this much faster than eager.")] = None,
    budget_usd: Annotated[float | None, typer.Option(min=0.0, help="Dollar budget for LLM calls.")] = 5.0,
    resume: Annotated[str | None, typer.Option(help="Continue an interrupted run by its id.")] = None,
    device: DeviceOpt = Device.auto,
    json_out: JsonOpt = False,
) -> None:
    """Write a fast, verified kernel for OP (offline: find a library kernel when no provider is set)."""
    if op is None and resume is None:
        raise fail("give a problem file, or --resume RUN_ID")
    if op is not None and not op.is_file():
        raise fail(f"problem file {op} does not exist" if not op.exists() else f"{op} is a folder; give the .py file")
    opts = verify_options(device, 3, 300.0, True)
    code = run(op=op, backend=backend.value, out=out, provider=provider.value if provider else None, model=model,
               base_url=base_url, script=script, turns=turns, candidates=candidates, beam=beam,
               target_speedup=target_speedup, budget_usd=budget_usd, resume=resume, options=opts,
               json_out=json_out, console=console, err=err)
    raise typer.Exit(int(code))


def _offline(op: Path, backend: str, out: Path | None, options: Any, help_text: str, json_out: bool,
             console: Any, err: Any) -> int:
    from kernelagent.kernels import LibraryError
    from kernelagent.tools.optimize import offline_optimize
    from kernelagent.verifier.api import Verifier

    try:
        with Verifier(options) as v:
            if json_out:
                result = offline_optimize(op, backend, v, out, help_text)
            else:
                with console.status("no LLM provider configured: looking for a library kernel ..."):
                    result = offline_optimize(op, backend, v, out, help_text)
    except (ProblemError, LibraryError) as e:
        err.print(f"[bold red]error:[/] {e}")
        return EXIT_INPUT
    if json_out:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        _render_offline(result, console, err)
    return EXIT_OK if result.accepted else EXIT_REJECTED


def _render_offline(result: Any, console: Any, err: Any) -> None:
    from kernelagent.cli.render import render_report

    console.print("[bold]offline mode[/]: no LLM provider is configured, so no new kernel can be written.")
    hits = [m["name"] for m in result.matches if m["match"]]
    console.print(f"library entries computing the same function: {', '.join(hits) or 'none'}")
    if result.report is not None:
        console.print(f"verified library kernel [bold]{result.chosen}[/] on your problem's shapes:")
        console.print(render_report(result.report))
    if result.out_path:
        console.print(f"[green]wrote[/] {result.out_path}")
    for note in result.notes:
        console.print(f"note: {note}")
    err.print("\nTo let kernelagent write new kernels, configure an LLM provider.\n" + result.provider_help,
              markup=False, highlight=False)


def run(*, op: Path | None, backend: str, out: Path | None, provider: str | None, model: str | None,
        base_url: str | None, script: Path | None, turns: int, candidates: int, beam: int,
        target_speedup: float | None, budget_usd: float | None, resume: str | None, options: Any,
        json_out: bool, console: Any, err: Any) -> int:
    from kernelagent.agent import OptimizeConfig, make_provider
    from kernelagent.agent.errors import ProviderNotConfigured
    from kernelagent.memory import open_store

    store = open_store()
    prior = store.run(resume) if resume else None
    if resume and prior is None:
        err.print(f"[bold red]error:[/] no run {resume!r} in {store.db.conn}")
        return EXIT_INPUT
    try:
        prov = make_provider(provider or (prior or {}).get("provider"), model or (prior or {}).get("model"),
                             base_url, script=str(script) if script else None)
    except ProviderNotConfigured as e:
        if resume or op is None:
            err.print(f"error: {e}", markup=False)
            return EXIT_INPUT
        return _offline(op, backend, out, options, str(e), json_out, console, err)
    config = None if resume else OptimizeConfig(
        backend=backend, out=str(out) if out else None, turns=turns, candidates=candidates, beam=beam,
        target_speedup=target_speedup, budget_usd=budget_usd)
    return _agent(op, config, prov, store, resume, options, json_out, console, err)


def _agent(op: Path | None, config: Any, prov: Any, store: Any, resume: str | None, options: Any,
           json_out: bool, console: Any, err: Any) -> int:
    from kernelagent.agent import LiveView, optimize
    from kernelagent.agent.errors import RunFailed, RunInterrupted, RunNotFound
    from kernelagent.tools.optimize import build_deps
    from kernelagent.verifier.api import Verifier
    from kernelagent.verifier.sandbox.pool import WorkerPool

    verifier = Verifier(options, pool=WorkerPool(size=1))
    deps = build_deps(prov, verifier, store)
    try:
        if json_out:
            result = optimize(str(op) if op else None, config, deps, resume=resume)
        else:
            with LiveView(err) as view:
                result = optimize(str(op) if op else None, config, deps, resume=resume, progress=view)
    except (ProblemError, RunNotFound) as e:
        err.print(f"[bold red]error:[/] {e}")
        return EXIT_INPUT
    except RunInterrupted as e:
        err.print(f"interrupted: {e}")
        return EXIT_INTERRUPTED
    except RunFailed as e:
        err.print(f"[bold red]run failed:[/] {e}")
        return EXIT_INTERNAL
    finally:
        verifier.close()
    if json_out:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        console.print(f"run {result.run_id}: {result.status}; {result.message}")
        if result.out_path:
            console.print(f"[green]kernel[/] {result.out_path}   [dim]report {result.report_path}[/]")
    return EXIT_OK if result.accepted else EXIT_REJECTED
