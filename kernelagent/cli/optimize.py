"""The `optimize` command: the agent when a provider is configured, else the offline path.

Before the first paid call: the backend's packages, the limits, the model (asked of the provider) and
its price are checked; any of them wrong is one line and exit 2. A run that fails later is exit 3 with
the command that resumes it; Ctrl-C is exit 130, the run marked interrupted and resumable.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
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


@dataclass
class Request:
    """What the user asked for, as parsed from the flags (None: not given)."""

    op: Path | None
    backend: str
    out: Path | None
    provider: str | None
    model: str | None
    base_url: str | None
    script: Path | None
    resume: str | None
    limits: dict[str, Any]
    json_out: bool
    json_lines: bool = False


def optimize(
    op: Annotated[Path | None, typer.Argument(help="Problem file (KernelBench format).")] = None,
    backend: Annotated[Backend, typer.Option(help="Kernel language (the verifier rejects others).")] = Backend.triton,
    out: Annotated[Path | None, typer.Option(help="Where to write the best kernel (default: beside OP).")] = None,
    provider: Annotated[Provider | None, typer.Option(help="LLM provider (else config / environment).")] = None,
    model: Annotated[str | None, typer.Option(help="Model name (else $KERNELAGENT_MODEL, config, default).")] = None,
    base_url: Annotated[str | None, typer.Option(help="Provider endpoint (OpenAI-compatible servers).")] = None,
    script: Annotated[Path | None, typer.Option(help="JSONL script for --provider replay.")] = None,
    turns: Annotated[int, typer.Option(min=1, help="Most LLM turns.")] = 8,
    candidates: Annotated[int, typer.Option(min=1, help="Candidates per turn.")] = 4,
    beam: Annotated[int, typer.Option(min=1, help="Branches kept between turns.")] = 2,
    target_speedup: Annotated[float | None, typer.Option(help="Stop once this much faster than eager.")] = None,
    budget_usd: Annotated[float | None, typer.Option(min=0.0, help="Dollar budget for LLM calls; a call "
                                                      "whose worst case would pass it is not made.")] = 5.0,
    max_tokens_total: Annotated[int | None, typer.Option(min=1, help="Token budget (in + out) of the run.")] = None,
    max_output_tokens: Annotated[int, typer.Option(min=1, help="Most output tokens of one call.")] = 16000,
    gpu_seconds: Annotated[float | None, typer.Option(min=0.0, help="Budget of verifier seconds.")] = None,
    verify_workers: Annotated[int, typer.Option(min=1, help="Candidates verified at once.")] = 1,
    price_in: Annotated[float | None, typer.Option(min=0.0, help="Dollars per million input tokens, for a model "
                                                   "without a known price (0 for a local server).")] = None,
    price_out: Annotated[float | None, typer.Option(min=0.0, help="Dollars per million output tokens.")] = None,
    thinking_budget: Annotated[int | None, typer.Option(min=1024, help="Anthropic extended thinking: tokens of "
                                                        "thinking per call (added to --max-output-tokens).")] = None,
    resume: Annotated[str | None, typer.Option(help="Continue an interrupted or failed run by its id.")] = None,
    device: DeviceOpt = Device.auto,
    json_out: JsonOpt = False,
    json_lines: Annotated[bool, typer.Option("--json-lines", help="Stream progress as one JSON object per line on "
                                             "stdout (the last is `finished` or `error`).")] = False,
) -> None:
    """Write a fast, verified kernel for OP (offline: find a library kernel when no provider is set)."""
    if op is None and resume is None:
        raise fail("give a problem file, or --resume RUN_ID")
    if op is not None and not op.is_file():
        raise fail(f"problem file {op} does not exist" if not op.exists() else f"{op} is a folder; give the .py file")
    limits = {"turns": turns, "candidates": candidates, "beam": beam, "target_speedup": target_speedup,
              "budget_usd": budget_usd, "budget_tokens": max_tokens_total, "max_output_tokens": max_output_tokens,
              "budget_gpu_s": gpu_seconds, "verify_workers": verify_workers, "price_in": price_in,
              "price_out": price_out, "thinking_budget": thinking_budget}
    req = Request(op=op, backend=backend.value, out=out, provider=provider.value if provider else None, model=model,
                  base_url=base_url, script=script, resume=resume, limits=limits, json_out=json_out or json_lines,
                  json_lines=json_lines)
    opts = verify_options(device, 3, 300.0, True, backend=backend.value)
    raise typer.Exit(int(run(req, opts)))


def run(req: Request, options: Any) -> int:
    """Build the provider, check everything before spending, then run the agent (or the offline path)."""
    from kernelagent.agent import OptimizeConfig, make_provider
    from kernelagent.agent.errors import ProviderNotConfigured, SetupError
    from kernelagent.memory import AmbiguousIdError, open_store

    store = open_store()
    try:
        prior = store.run(req.resume) if req.resume else None
    except AmbiguousIdError as e:
        err.print(f"error: {e}", markup=False)
        return ExitCode.INPUT
    if prior is not None:  # an id prefix names the run; the checkpoint is keyed by its whole id
        req = dataclasses.replace(req, resume=prior["id"])
    if req.resume and prior is None:
        err.print(f"error: no run {req.resume!r} in memory; `kernelagent history` lists runs", markup=False)
        return EXIT_INPUT
    config = OptimizeConfig.from_dict(prior.get("config") or {}) if prior else OptimizeConfig(
        backend=req.backend, out=str(req.out) if req.out else None, **req.limits)
    try:
        prov = make_provider(req.provider or (prior or {}).get("provider"), req.model or (prior or {}).get("model"),
                             req.base_url, script=str(req.script) if req.script else None,
                             thinking_budget=config.thinking_budget)
    except ProviderNotConfigured as e:
        if req.resume or req.op is None or req.provider:
            err.print(f"error: {e}", markup=False)
            return EXIT_INPUT
        return _offline(req, options, str(e), store)
    except SetupError as e:
        err.print(f"error: {e}", markup=False)
        return EXIT_INPUT
    return _checked_agent(req, config, prov, store, options, resumed=prior is not None)


def _checked_agent(req: Request, config: Any, prov: Any, store: Any, options: Any, *, resumed: bool) -> int:
    """Preflight (exit 2 for the user's mistakes, 3 when the provider cannot be reached), then the run."""
    from kernelagent.agent.errors import ProviderAuthError, ProviderError, SetupError
    from kernelagent.agent.preflight import preflight

    try:
        price = preflight(prov, config)
    except (SetupError, ProviderAuthError) as e:
        err.print(f"error: {e}", markup=False)
        return EXIT_INPUT
    except ProviderError as e:
        err.print(f"error: could not reach the {prov.name} provider before starting: {e}", markup=False)
        return EXIT_INTERNAL
    return _agent(req, None if resumed else config, prov, store, options, price)


def _agent(req: Request, config: Any, prov: Any, store: Any, options: Any, price: Any) -> int:
    from kernelagent.agent import LiveView, optimize
    from kernelagent.agent.errors import RunFailed, RunInterrupted, RunNotFound, SetupError
    from kernelagent.tools.optimize import agent_deps

    deps, close = agent_deps(prov, options, store)
    deps.price = price
    op = str(req.op) if req.op else None
    try:
        if req.json_lines:
            result = optimize(op, config, deps, resume=req.resume, progress=JsonLines())
        elif req.json_out:
            result = optimize(op, config, deps, resume=req.resume)
        else:
            with LiveView(err) as view:
                result = optimize(op, config, deps, resume=req.resume, progress=view)
    except (ProblemError, RunNotFound, SetupError) as e:
        err.print(f"error: {e}", markup=False)
        return EXIT_INPUT
    except RunInterrupted as e:
        err.print(f"interrupted: {e}", markup=False)
        return EXIT_INTERRUPTED
    except RunFailed as e:
        err.print(f"run failed: {e}", markup=False)
        return EXIT_INTERNAL
    finally:
        close()
    if req.json_lines:
        JsonLines()({"event": "finished", **result.to_dict()})
    else:
        _print_result(result, req.json_out)
    return result_exit(result)


def result_exit(result: Any) -> ExitCode:
    """0 accepted; 4 when nothing was accepted but a kernel compiled that could not be run (no GPU); else 1."""
    if result.accepted:
        return EXIT_OK
    return ExitCode.UNVERIFIED if result.unverified else EXIT_REJECTED


class JsonLines:
    """`--json-lines`: each progress event as one flushed JSON object on stdout, `v` the format version
    (streamed-token ticks are left out: the `proposed` event carries the totals)."""

    VERSION = 1

    def __call__(self, event: dict[str, Any]) -> None:
        if event.get("event") == "stream":
            return
        line = {"v": self.VERSION, "time": round(time.time(), 3), **event}
        print(json.dumps(line, default=str), flush=True)


def _print_result(result: Any, json_out: bool) -> None:
    if json_out:
        print(json.dumps(result.to_dict(), indent=2, default=str))
        return
    console.print(f"run {result.run_id}: {result.status}; {result.message}", markup=False, highlight=False)
    if result.unverified:
        console.print("[yellow]no kernel accepted: candidates compiled, but without a GPU none could be run "
                      "(not verified)[/]")
    if result.out_path:
        console.print(f"[green]kernel[/] {result.out_path}   [dim]report {result.report_path}[/]")


# -- offline -----------------------------------------------------------------------------------------------

def _offline(req: Request, options: Any, help_text: str, store: Any) -> int:
    from kernelagent.kernels import LibraryError
    from kernelagent.tools.optimize import offline_optimize
    from kernelagent.verifier.api import Verifier

    assert req.op is not None
    try:
        with Verifier(options) as v:
            if req.json_out:
                result = offline_optimize(req.op, req.backend, v, req.out, help_text, store)
            else:
                with err.status("no LLM provider configured: looking for a library kernel ..."):
                    result = offline_optimize(req.op, req.backend, v, req.out, help_text, store)
    except (ProblemError, LibraryError) as e:
        err.print(f"error: {e}", markup=False)
        return EXIT_INPUT
    if req.json_out:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        _render_offline(result)
    return result_exit(result)


def _render_offline(result: Any) -> None:
    from rich.markup import escape

    from kernelagent.cli.render import render_report
    from kernelagent.tools.presets import options_text

    console.print("[bold]offline mode[/]: no LLM provider is configured, so no new kernel can be written.")
    hits = [escape(m["name"] + (f" ({options_text(m['options'])})" if m.get("options") else ""))
            for m in result.matches if m["match"]]
    console.print(f"library entries computing the same function: {', '.join(hits) or 'none'}")
    if result.report is not None:
        console.print(f"library kernel [bold]{result.chosen}[/] checked on your problem:")
        console.print(render_report(result.report))
    if result.out_path:
        console.print(f"[green]wrote[/] {result.out_path}")
    for title, items in (("checked", result.checked), ("not checked", result.not_checked)):
        for item in items:
            console.print(f"{title}: {item}", markup=False, highlight=False, soft_wrap=True)
    for note in result.notes:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    if result.run_id:
        console.print(f"recorded as run {result.run_id} (see `kernelagent history`)", markup=False,
                      highlight=False, soft_wrap=True)
    err.print("\nTo let kernelagent write new kernels, configure an LLM provider.\n" + result.provider_help,
              markup=False, highlight=False)
