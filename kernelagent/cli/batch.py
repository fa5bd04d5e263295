"""The `batch` command: many problems, verified or optimized, one worker set per GPU (or on Ray), resumable;
a live progress display on stderr and a summary in KernelBench's terms."""

from __future__ import annotations

import json
import threading
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console, Group
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kernelagent.cli.common import (
    Backend,
    Device,
    DeviceOpt,
    ExitCode,
    JsonOpt,
    console,
    err,
    exit_for_verdicts,
    fail,
)


class Mode(StrEnum):
    verify = "verify"
    optimize = "optimize"


class BatchView:
    """Live progress: one bar over all items, one line per shard saying what it is working on."""

    def __init__(self, stream: Console):
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[tally]}"), TimeElapsedColumn(), console=stream,
                                 transient=False)
        self.main: Any = None
        self.shards: dict[str, Any] = {}
        self.tally = {"accepted": 0, "unverified": 0, "rejected": 0}
        self._lock = threading.Lock()

    def __enter__(self) -> BatchView:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)
        self.progress.console.print()  # end on a new line, so what is printed next starts clean

    def __call__(self, event: dict[str, Any]) -> None:
        with self._lock:
            getattr(self, "_on_" + event["event"].replace(".", "_"), lambda _e: None)(event)

    def _tally(self) -> str:
        unverified = f" [yellow]{self.tally['unverified']} not verified (no GPU)[/]" if self.tally["unverified"] else ""
        return f"[green]{self.tally['accepted']} ok[/]{unverified} [red]{self.tally['rejected']} failed[/]"

    def _on_plan(self, e: dict[str, Any]) -> None:
        note = f" (continuing {e['batch_id']}: {e['done']} done)" if e["resumed"] else f" {e['batch_id']}"
        self.main = self.progress.add_task(f"batch{note}", total=e["total"], completed=e["done"], tally="")

    def _on_shards(self, e: dict[str, Any]) -> None:
        for label in e["shards"]:
            self.shards[label] = self.progress.add_task(f"  {label}: idle", total=None, tally="", start=False)

    def _on_start(self, e: dict[str, Any]) -> None:
        task = self.shards.get(e["shard"])
        if task is not None:
            what = f"{e['problem']} / {e['candidate']}" if e["candidate"] else e["problem"]
            self.progress.update(task, description=f"  {e['shard']}: {what}")

    def _on_done(self, e: dict[str, Any]) -> None:
        self.tally[e["verdict"] if e["verdict"] in ("accepted", "unverified") else "rejected"] += 1
        if e["shard"] in self.shards:
            self.progress.update(self.shards[e["shard"]], description=f"  {e['shard']}: idle")
        if self.main is not None:
            self.progress.update(self.main, advance=1, tally=self._tally())

    def _on_error(self, e: dict[str, Any]) -> None:
        self.progress.console.print(f"[yellow]{e['problem']}[/]: {e['message']}", highlight=False)

    def _on_agent_turn(self, e: dict[str, Any]) -> None:
        task = self.shards.get(e["shard"])
        if task is not None:
            self.progress.update(task, description=f"  {e['shard']}: {e['problem']} turn {e['turn']}/{e['turns']}")


def _pct(value: float | None) -> str:
    return "not measured" if value is None else f"{100 * value:.1f}%"


def summary_view(s: dict[str, Any]) -> Group:
    """The KernelBench table (fast_p against eager and torch.compile) and one line per problem."""
    head = (f"{s['problems']} problems, {s['evaluated']} with candidates ({s['candidates']} candidates), "
            f"{s['no_candidate']} without; correct: {s['correct']}"
            + (f" ({s['correct_pct']:.1f}%)" if s["correct_pct"] is not None else "")
            + (f"; compiled but not verified (no GPU): {s['unverified']}" if s.get("unverified") else ""))
    fast = Table(title="KernelBench summary", header_style="bold")
    for col in ("baseline", "fast_0", "fast_1", "fast_1.5", "geomean"):
        fast.add_column(col, justify="left" if col == "baseline" else "right", no_wrap=True)
    for name, key in (("eager", "eager"), ("torch.compile", "compile")):
        b = s[key]
        geo = "not measured" if b["geomean_speedup"] is None else f"{b['geomean_speedup']:.3g}x"
        fast.add_row(name, _pct(b["fast_0"]), _pct(b["fast_1"]), _pct(b["fast_1.5"]), geo)
    per = Table(header_style="bold", box=None)
    for col in ("problem", "cands", "correct", "vs eager", "vs compile", "failures"):
        per.add_column(col, overflow="fold")
    for p in s["per_problem"]:
        x = lambda v: "-" if v is None else f"{v:.3g}x"  # noqa: E731
        per.add_row(p["problem"], str(p["candidates"]), _correct_cell(p),
                    x(p["speedup_eager"]), x(p["speedup_compile"]),
                    ", ".join(f"{k} {v}" for k, v in p["failures"].items()))
    note = "" if s["speed_measured"] else "speed not measured (no GPU): only correctness was checked"
    return Group(head, fast, per, *([note] if note else []))


def _correct_cell(p: dict[str, Any]) -> str:
    if p["correct"]:
        return "[green]yes[/]"
    if not p["candidates"]:
        return "[dim]no candidate[/]"
    return "[yellow]not verified (no GPU)[/]" if p.get("unverified") else "[red]no[/]"


def batch_exit(summary: dict[str, Any]) -> ExitCode:
    """0 when every problem with candidates got a correct kernel; 4 when the others only compiled (no GPU to
    run them); 1 when some failed, or nothing was evaluated."""
    evaluated = [p for p in summary["per_problem"] if p["candidates"]]
    if not evaluated:
        return ExitCode.REJECTED
    verdicts = ["accepted" if p["correct"] else "unverified" if p.get("unverified") else "rejected"
                for p in evaluated]
    return exit_for_verdicts(verdicts)


def _gpus(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        ids = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise fail(f"--gpus takes GPU indices like 0,1 (got {text!r})") from e
    if not ids:
        raise fail("--gpus needs at least one GPU index")
    return ids


def _provider(provider: str | None, model: str | None, base_url: str | None) -> Any:
    from kernelagent.agent import make_provider
    from kernelagent.agent.errors import ProviderNotConfigured

    try:
        return make_provider(provider, model, base_url)
    except ProviderNotConfigured as e:
        raise fail(str(e).splitlines()[0] + " (--mode optimize needs an LLM provider)") from e


def batch(
    paths: Annotated[list[Path], typer.Argument(metavar="DIR|FILE...", help="Problem files or folders "
                                                "(KernelBench level folders as they are).")],
    mode: Annotated[Mode, typer.Option(help="verify: the candidates beside each problem; optimize: "
                                       "let the agent write kernels.")] = Mode.verify,
    jobs: Annotated[int | None, typer.Option(min=1, help="CPU: verifications at once; optimize: problems "
                                             "in flight (default four per GPU).")] = None,
    gpus: Annotated[str | None, typer.Option(help="GPU indices, e.g. 0,1 (default: all visible); one "
                                             "worker set per GPU.")] = None,
    device: DeviceOpt = Device.auto,
    seeds: Annotated[int, typer.Option(min=1, help="Fresh seeds for the correctness trials.")] = 3,
    timeout: Annotated[float, typer.Option(min=1.0, help="Wall-clock limit per worker, seconds.")] = 300.0,
    ray: Annotated[str | None, typer.Option(help="Run on Ray: a cluster address, or 'local'.")] = None,
    new: Annotated[bool, typer.Option("--new", help="Start afresh instead of continuing the same batch.")] = False,
    resume: Annotated[str | None, typer.Option(help="Continue this batch id (a prefix is enough).")] = None,
    backend: Annotated[Backend, typer.Option(help="optimize: kernel language.")] = Backend.triton,
    provider: Annotated[str | None, typer.Option(help="optimize: LLM provider.")] = None,
    model: Annotated[str | None, typer.Option(help="optimize: model name.")] = None,
    base_url: Annotated[str | None, typer.Option(help="optimize: provider endpoint.")] = None,
    turns: Annotated[int, typer.Option(min=1, help="optimize: most LLM turns per problem.")] = 8,
    candidates: Annotated[int, typer.Option(min=1, help="optimize: candidates per turn.")] = 4,
    budget_usd: Annotated[float | None, typer.Option(min=0.0, help="optimize: dollars per problem.")] = 5.0,
    out_dir: Annotated[Path | None, typer.Option(help="optimize: where kernels go (default: in the home).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Verify or optimize every problem under DIR|FILE; running the same command again continues the batch.

    Exit code 0 when every problem with candidates got a correct kernel, 1 when some did not, 4 when the
    rest only compiled (CuTe DSL without a GPU: not verified).
    """
    from kernelagent.memory import open_store
    from kernelagent.tools.batch import BatchError, BatchOptions, BatchRunner, discover

    opts = BatchOptions(mode=mode.value, device=device.value, jobs=jobs, gpus=_gpus(gpus), seeds=seeds,
                        timeout=timeout, backend=backend.value, ray=ray, new=new, resume=resume,
                        out_dir=str(out_dir) if out_dir else None,
                        optimize={"turns": turns, "candidates": candidates, "budget_usd": budget_usd})
    llm = _provider(provider, model, base_url) if mode == Mode.optimize else None
    try:
        runner = BatchRunner(open_store(), discover(paths), opts, provider=llm)
        if json_out:
            summary = runner.run()
        else:
            with BatchView(err) as view:
                runner.emit = view
                summary = runner.run()
    except BatchError as e:
        raise fail(str(e)) from e
    except KeyboardInterrupt:
        err.print("interrupted: run the same command again to continue the batch")
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    if json_out:
        print(json.dumps(summary, indent=2, default=str))
    else:
        console.print(summary_view(summary))
        console.print(f"[dim]batch {summary['batch_id']}: `kernelagent report {summary['batch_id'][:8]}` "
                      "writes an HTML report[/]")
    raise typer.Exit(int(batch_exit(summary)))
