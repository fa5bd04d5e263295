"""`kernelagent mcp`: kernelagent's tools for editors and coding agents, over stdio (Model Context Protocol).

One process holds a warm worker pool and its verifiers for its lifetime (see tools.session), so a verify
costs the candidate's own work; reference packs come from the persistent cache. Every tool takes typed
arguments and returns JSON; a long call sends progress notifications, a cancelled call kills its workers,
and a user's mistake comes back as a tool error with the one-line message the CLI prints.

    kernelagent mcp [--device auto|cpu|cuda] [--workers 2] [--no-record]
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from kernelagent import __version__
from kernelagent.kernels import LibraryError
from kernelagent.problem import ProblemError
from kernelagent.tools import bench as B
from kernelagent.tools.session import Cancelled, Job, Session
from kernelagent.tools.verify import InputError, candidate_file, record, summary, verify_file

T = TypeVar("T")
HEARTBEAT_S = 2.0   # a progress notification at least this often while a call runs
_USER_ERRORS = (InputError, ProblemError, LibraryError, ValueError, Cancelled)

INSTRUCTIONS = """kernelagent verifies GPU kernels (Triton or CuTe DSL) against a PyTorch reference.
A problem file defines `class Model(nn.Module)`, `get_inputs()`, `get_init_inputs()` (KernelBench format).
A candidate defines `class ModelNew(nn.Module)` with the same constructor and forward, computing with its
own @triton.jit / CuTe DSL kernels (PyTorch only allocates and reshapes). Call `guide` ("skill" first,
then "triton" or "cute") before writing one; call `verify` after every change and fix what
`report.feedback` says; accepted means correct on fresh inputs and no cheat found. Verdict `unverified`
(a CuTe DSL kernel on a server without a GPU) means compiled but never run: not accepted. Paths are resolved
from the server's working directory; absolute paths are safest."""

ProblemArg = Annotated[str, Field(description="Path of the problem file (KernelBench format: Model, get_inputs).")]
SourceArg = Annotated[str | None, Field(description="The candidate's Python source (defines ModelNew).")]
PathArg = Annotated[str | None, Field(description="Path of the candidate file, instead of candidate_source.")]
SeedsArg = Annotated[int, Field(ge=1, le=16, description="Fresh seeds for the correctness trials.")]
TimingArg = Annotated[bool, Field(description="Time candidate and baselines (GPU only).")]
TimeoutArg = Annotated[float, Field(gt=0, le=3600, description="Wall-clock limit per worker, seconds.")]
_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


class Tools:
    """The tool functions, bound to one session (warm verifiers) and one memory store."""

    def __init__(self, session: Session, store: Any | None):
        self.session, self.store = session, store

    async def _run(self, ctx: Context, label: str, fn: Callable[[Callable[[str], None]], T]) -> T:
        """Run `fn(say)` in a thread as a cancellable job, with progress notifications meanwhile."""
        job, status = Job(), {"msg": label, "n": 0, "t0": time.monotonic()}

        def say(msg: str) -> None:
            status["msg"] = msg

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_heartbeat, ctx, status)
                try:
                    result = await anyio.to_thread.run_sync(lambda: job.run(lambda: fn(say)), abandon_on_cancel=True)
                except anyio.get_cancelled_exc_class():
                    job.cancel()  # the call was cancelled: its workers die now, the thread ends soon after
                    raise
                tg.cancel_scope.cancel()
        except* _USER_ERRORS as group:
            raise ToolError(str(group.exceptions[0])) from group.exceptions[0]
        await _progress(ctx, status)  # the outcome, as the last notification
        return result

    def _candidate(self, source: str | None, path: str | None) -> Path:
        try:
            return candidate_file(source, path, self.session.workdir / "candidates")
        except InputError as e:
            raise ToolError(str(e)) from e

    def _verifier(self, **options: Any) -> Any:
        try:
            return self.session.verifier(**options)
        except ValueError as e:
            raise ToolError(str(e)) from e

    async def verify(self, problem: ProblemArg, ctx: Context, candidate_source: SourceArg = None,
                     candidate_path: PathArg = None, seeds: SeedsArg = 3, timing: TimingArg = True,
                     timeout: TimeoutArg = 300.0) -> dict[str, Any]:
        """Verify a candidate kernel against a problem: correctness on fresh inputs, integrity checks
        (cheats), and timing on a GPU. `report` follows docs/report.schema.json; `report.feedback` says
        what to fix. The attempt is recorded in kernelagent's history."""
        cand = self._candidate(candidate_source, candidate_path)
        verifier = self._verifier(seeds=seeds, timing=timing, timeout=timeout)

        def work(say: Callable[[str], None]) -> dict[str, Any]:
            report = verify_file(verifier, problem, cand, say)
            say(summary(report))
            aid = record(self.store, problem, cand, report) if self.store is not None else None
            return {"summary": summary(report), "attempt_id": aid, "report": report.to_dict()}

        return await self._run(ctx, "verifying", work)

    async def audit(self, problem: ProblemArg, ctx: Context, seeds: SeedsArg = 3) -> dict[str, Any]:
        """Is the problem degenerate: would zeros, a constant, the identity or the input's mean pass?"""
        from kernelagent.tools.audit import audit_with

        verifier = self._verifier(seeds=seeds)
        return await self._run(ctx, "running the reference", lambda say: audit_with(verifier, problem))

    async def bench(self, ctx: Context, problem: Annotated[str | None, Field(
                        description="Problem file (default: the library entry's own reference).")] = None,
                    candidate_source: SourceArg = None, candidate_path: PathArg = None,
                    library: Annotated[str | None, Field(description="Time this library entry's kernel.")] = None,
                    backend: Literal["triton", "cute"] = "triton",
                    shapes: Annotated[list[list[int]] | None, Field(
                        description="One shape per tensor input of get_inputs(), e.g. [[4096, 8192]].")] = None
                    ) -> dict[str, Any]:
        """Time a candidate or a library kernel against PyTorch eager and torch.compile, optionally at
        other input shapes. The kernel is verified first (a wrong kernel is not timed); GPU only."""
        if library is not None and (candidate_source is not None or candidate_path is not None):
            raise ToolError("give a candidate or a library entry, not both")
        try:
            if library is not None:
                ref, cand = B.library_kernel(library, backend)
                problem = problem or str(ref)
            else:
                cand = self._candidate(candidate_source, candidate_path)
            if problem is None:
                raise InputError("give a problem file (or a library entry, whose reference is used)")
            target = B.shaped_problem(problem, shapes, self.session.workdir / "bench") if shapes else problem
        except _USER_ERRORS as e:
            raise ToolError(str(e)) from e
        verifier = self._verifier(seeds=3, timing=True)
        return await self._run(ctx, "benchmarking",
                               lambda say: B.bench_result(verify_file(verifier, target, cand, say), shapes))

    async def profile(self, problem: ProblemArg, ctx: Context, candidate_source: SourceArg = None,
                      candidate_path: PathArg = None,
                      sanitize: Annotated[bool, Field(description="Also compute-sanitizer memcheck + racecheck.")]
                      = False) -> dict[str, Any]:
        """Nsight Compute metrics for every kernel the candidate launches (and, with sanitize, memory and
        race checks), after a full verification. Needs a CUDA GPU."""
        if self.session.device != "cuda":
            raise ToolError("profile needs a CUDA GPU (Nsight Compute, compute-sanitizer); this server runs on the CPU")
        cand = self._candidate(candidate_source, candidate_path)
        verifier = self._verifier(profile=True, sanitize=sanitize)

        def work(say: Callable[[str], None]) -> dict[str, Any]:
            report = verify_file(verifier, problem, cand, say)
            tools = [s.__dict__ for s in report.stages if s.name in ("profile", "sanitize")]
            return {"summary": summary(report), "profile": report.metrics.get("profile"), "stages": tools,
                    "report": report.to_dict()}

        return await self._run(ctx, "profiling", work)

    async def library_search(self, ctx: Context, query: Annotated[str | None, Field(
                                 description="Words to find in an entry's name, summary or ops.")] = None,
                             problem: Annotated[str | None, Field(
                                 description="Problem file: entries computing the same function.")] = None
                             ) -> dict[str, Any]:
        """Kernels in kernelagent's verified library, by words or by matching a problem's function."""
        from kernelagent.tools.library_search import search

        verifier = self._verifier(seeds=1, timing=False) if problem else None
        entries = await self._run(ctx, "searching the library", lambda say: search(query, problem, verifier))
        return {"entries": entries}

    def library_show(self, name: Annotated[str, Field(description="Library entry name, e.g. softmax.")]
                     ) -> dict[str, Any]:
        """One library entry: its card (verified shapes, timings), reference and kernel sources."""
        from kernelagent.tools.library_search import show

        return _user_call(show, name)

    def history(self, problem: Annotated[str | None, Field(description="Only this problem (name).")] = None,
                attempt_id: Annotated[str | None, Field(
                    description="One attempt (id or unique prefix): its source and feedback.")] = None,
                limit: Annotated[int, Field(ge=1, le=500)] = 20) -> dict[str, Any]:
        """Recent verified attempts (newest first), or one attempt's source, verdict and feedback."""
        from kernelagent.tools import history as H

        if self.store is None:
            raise ToolError("history is off: the server was started with --no-record")
        if attempt_id:
            return {"attempt": _user_call(H.one, self.store, attempt_id)}
        return {"attempts": _user_call(H.recent, self.store, problem, limit)}

    def guide(self, name: Annotated[Literal["skill", "triton", "cute"], Field(
                  description="skill: how to work with kernelagent; triton / cute: how to write kernels.")]
              ) -> str:
        """The guides kernelagent's own agent writes kernels by (markdown)."""
        from kernelagent.tools.guides import guide

        return _user_call(guide, name)


async def _progress(ctx: Context, status: dict[str, Any]) -> None:
    status["n"] += 1
    status["sent"], status["last"] = time.monotonic(), status["msg"]
    await ctx.report_progress(status["n"], None, f"{status['msg']} ({status['sent'] - status['t0']:.0f} s)")


async def _heartbeat(ctx: Context, status: dict[str, Any]) -> None:
    """Progress notifications: at once when the stage changes, else every HEARTBEAT_S (elapsed seconds)."""
    while True:
        if status["msg"] != status.get("last") or time.monotonic() - status.get("sent", 0.0) >= HEARTBEAT_S:
            await _progress(ctx, status)
        await anyio.sleep(0.2)


def _user_call(fn: Callable[..., T], *args: Any) -> T:
    try:
        return fn(*args)
    except _USER_ERRORS as e:
        raise ToolError(str(e)) from e


def build_server(session: Session, store: Any | None) -> MCPServer:
    """The MCP server with every tool registered on `session`."""
    server = MCPServer(name="kernelagent", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    tools = Tools(session, store)
    for name in ("verify", "audit", "bench", "profile", "library_search"):
        server.add_tool(getattr(tools, name), name=name)
    for name in ("library_show", "history", "guide"):
        server.add_tool(getattr(tools, name), name=name, annotations=_READ_ONLY)
    return server


def serve(device: str = "auto", workers: int = 2, record_attempts: bool = True) -> None:
    """Run the server on stdin/stdout until the client closes it."""
    session = Session(device=device, pool_size=workers)
    store = None
    if record_attempts:
        from kernelagent.memory import open_store
        store = open_store()
    try:
        session.warm()
        build_server(session, store).run("stdio")
    finally:
        session.close()
        if store is not None:
            store.close()
