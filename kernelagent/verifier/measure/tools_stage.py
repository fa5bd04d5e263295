"""The `profile` and `sanitize` stages: run the accepted candidate once more under ncu / compute-sanitizer."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelagent.verifier.measure.profiling import (
    ncu_prefix,
    parse_ncu_csv,
    parse_sanitizer,
    sanitizer_prefix,
    summarize_profile,
)
from kernelagent.verifier.report import Stage
from kernelagent.verifier.sandbox.spawn import make_workdir

# One forward of the candidate in a worker under a tool: (tool prefix, main input set?, extra env) -> result
SingleRun = Callable[[list[str], bool, "dict[str, str] | None"], Any]


def _log_path() -> Path:
    return make_workdir(prefix="ka-tool-") / "tool.log"


def profile_stage(single_run: SingleRun) -> Stage:
    log = _log_path()
    prefix = ncu_prefix(log)
    if prefix is None:
        return Stage("profile", "skipped", 0.0, "ncu not found on PATH")
    res = single_run(prefix, True, None)
    text = log.read_text(errors="replace") if log.exists() else ""
    kernels = parse_ncu_csv(text)
    shutil.rmtree(log.parent, ignore_errors=True)
    if res.status != "ok" or not kernels:
        why = res.stderr_tail[-300:] or text[-300:]
        return Stage("profile", "warning", round(res.seconds, 2), f"ncu gave no kernel records ({res.status}): {why}")
    return Stage("profile", "passed", round(res.seconds, 2), f"{len(kernels)} kernel launch(es) profiled",
                 {"kernels": kernels, "summary": summarize_profile(kernels)})


def sanitize_stage(single_run: SingleRun) -> Stage:
    results: dict[str, Any] = {}
    seconds = 0.0
    for tool in ("memcheck", "racecheck"):
        log = _log_path()
        prefix = sanitizer_prefix(tool, log)
        if prefix is None:
            return Stage("sanitize", "skipped", 0.0, "compute-sanitizer not found on PATH")
        # without the caching allocator each tensor is its own allocation, so memcheck sees
        # reads and writes just past a tensor's end (inside a cached segment they look valid)
        res = single_run(prefix, False, {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})
        seconds += res.seconds
        text = log.read_text(errors="replace") if log.exists() else ""
        parsed = parse_sanitizer(text)
        parsed.update(status=res.status, launches=(res.result.get("single") or {}).get("launches"))
        parsed["incomplete"] = _incomplete(res, parsed, text)
        results[tool] = parsed
        shutil.rmtree(log.parent, ignore_errors=True)
    bad = {t: r for t, r in results.items() if r.get("errors")}
    if bad:
        tool, r = next(iter(bad.items()))
        return Stage("sanitize", "failed", round(seconds, 2), f"compute-sanitizer {tool}: {r['errors']} error(s)",
                     results)
    unfinished = {t: r["incomplete"] for t, r in results.items() if r["incomplete"]}
    if unfinished:  # never a pass the tool did not give
        tool, why = next(iter(unfinished.items()))
        return Stage("sanitize", "warning", round(seconds, 2), f"compute-sanitizer {tool} did not complete: {why}",
                     results)
    return Stage("sanitize", "passed", round(seconds, 2), "memcheck and racecheck found no errors", results)


def _incomplete(res: Any, parsed: dict[str, Any], log_text: str) -> str:
    """Why a sanitizer run says nothing about the kernel ('' when it ran the forward and summarised)."""
    if res.status != "ok":
        return f"the worker {res.status} ({res.died_how}): {res.stderr_tail[-300:]}"
    err = res.result.get("error")
    if err:
        return f"{err.get('type')}: {str(err.get('message', ''))[:300]}"
    if not parsed.get("launches"):
        return "the candidate's forward launched no kernel under the tool"
    if parsed.get("errors") is None:
        return f"no summary line in its log: {log_text[-300:] or '(empty)'}"
    return ""


def run_gpu_tools(single_run: SingleRun, profile: bool, sanitize: bool) -> list[Stage]:
    """The profile and sanitize stages asked for (facts only: judge.verdict.with_tool_stages decides)."""
    stages = []
    if profile:
        stages.append(profile_stage(single_run))
    if sanitize:
        stages.append(sanitize_stage(single_run))
    return stages
