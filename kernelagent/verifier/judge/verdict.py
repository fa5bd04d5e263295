"""From a candidate worker's result to the final Report: stages, category, metrics, feedback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelagent.problem import CandidateSpec
from kernelagent.verifier import report as R
from kernelagent.verifier.judge.checks import Judge, Judgement
from kernelagent.verifier.judge.feedback import build_feedback
from kernelagent.verifier.judge.timed import speed_claim
from kernelagent.verifier.measure.ceilings import load_ceilings
from kernelagent.verifier.measure.roofline import floor_ms, percent_of_limit, physics_floor_ms
from kernelagent.verifier.measure.timing import bootstrap_speedup
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.pack import Pack
from kernelagent.verifier.protocol import CandidateFacts
from kernelagent.verifier.report import Report, Stage
from kernelagent.verifier.sandbox import untrusted
from kernelagent.verifier.sandbox.pool import WorkerResult


def _worker_stages(stages: dict[str, Any]) -> list[Stage]:
    out = []
    for name, s in (stages or {}).items():
        out.append(Stage(name if name != "load" else "import", s["status"], s.get("seconds", 0.0),
                         s.get("message", ""), s.get("details", {})))
    return out


def _progress_stages(res: WorkerResult) -> list[Stage]:
    """The stages a worker that died had finished (its progress file, which the candidate could rewrite)."""
    import json

    path = Path(res.out_dir) / "progress.json"
    try:
        stages = json.loads(untrusted.read_bytes(path, 1 << 20))
        return _worker_stages(stages) if isinstance(stages, dict) else []
    except (OSError, ValueError, TypeError, KeyError, AttributeError):  # missing, a link or FIFO, malformed
        return []


def _dead_worker(base: Report, stages: list[Stage], res: WorkerResult, options: VerifyOptions) -> Report:
    stages += _progress_stages(res)
    tail = res.stderr_tail.strip()[-1500:]
    if res.status == "timeout":
        msg = f"the candidate ran past the {options.timeout:.0f} s limit (killed with its process group)"
        category = "timeout"
    elif res.status == "gpu_busy":
        msg = (f"the GPU stayed busy with other verifications past the {options.timeout:.0f} s limit while the "
               "candidate waited for its turn to be timed; try again, or with a longer --timeout")
        stages.append(Stage("run", "failed", round(res.seconds, 3), msg))
        base.blame = "verifier"
        return _done(base, stages, "internal_error", msg)
    elif res.status == "forged":
        msg = ("the worker's result was not the verifier's: the candidate wrote it (or wrote one and ended the "
               "process before the verifier could)")
        stages.append(Stage("run", "failed", round(res.seconds, 3), msg))
        return _done(base, stages, "policy_violation", msg, detail="never write the verifier's files or end the "
                     "process; compute the outputs in forward")
    elif res.status == "oom":
        lim = res.limits or {}
        why = lim.get("stopped") or f"over {lim.get('memory_limit_mb', '?')} MiB ({lim.get('basis', 'the limit')})"
        msg = f"the candidate's process went over its host-memory limit and was killed: {why}"
        category = "runtime_error"
    else:
        msg = f"the candidate's process died: {res.died_how}"
        category = "runtime_error"
    stages.append(Stage("run", "failed", round(res.seconds, 3), msg, {"stderr_tail": tail}))
    return _done(base, stages, category, msg, detail=f"stderr (last lines):\n{tail}" if tail else "")


def _done(base: Report, stages: list[Stage], category: str, message: str, *, detail: str = "",
          notes: list[str] | None = None, kernels: list[dict[str, Any]] | None = None) -> Report:
    base.stages = stages
    base.category = category
    base.verdict = R.verdict_of(category)
    base.message = message
    base.feedback = build_feedback(base, detail=detail, notes=notes, kernels=kernels)
    return base


def _compile_stage(facts: CandidateFacts, aot: dict[str, Any] | None, device: str) -> tuple[Stage, list[dict]]:
    kernels = list((facts.compile or {}).get("kernels") or [])
    details: dict[str, Any] = {}
    if aot:
        kernels += aot.get("kernels") or []
        details["aot_skipped"] = aot.get("skipped") or []
        if aot.get("error"):
            details["error"] = aot["error"].get("detail", "")
            return Stage("compile", "failed", 0.0, aot["error"]["message"], details), kernels
        if details["aot_skipped"]:  # the interpreter ran Python, which a kernel the GPU cannot run may compute in
            msg = (f"not compiled for sm_90a: {details['aot_skipped'][0]}; every kernel launched under the interpreter "
                   "must compile for the GPU, or what it ran may not be GPU code")
            details["not_compiled"] = True
            return Stage("compile", "failed", 0.0, msg, details), kernels
    target = "sm_90a (ahead of time, no GPU)" if device == "cpu" else "the GPU"
    details["kernels"] = kernels
    status = "passed" if kernels or device == "cuda" else "skipped"
    return Stage("compile", status, 0.0, f"compiled for {target}" if kernels else "", details), kernels


_WORKER_OWN = ("confinement", "sandbox_network", "import_seconds", "mode")


def decide(base: Report, stages: list[Stage], res: WorkerResult, aot: dict[str, Any] | None, pack: Pack,
           cspec: CandidateSpec, cand_path: Path, options: VerifyOptions) -> Report:
    """Assemble the report of a candidate run: the one place a candidate's verdict is made (`cand_path`: the
    worker's copy of the source, as tracebacks name it)."""
    device = pack.meta["device"]
    # the pack's facts describe the reference worker; the walls are the candidate worker's own
    shared = {k: v for k, v in pack.environment.items() if k not in _WORKER_OWN}
    base.environment = {**shared, **res.result.get("environment", {}), "device": device}
    if res.confinement:
        base.environment["confinement"] = res.confinement
    if res.status != "ok":
        return _dead_worker(base, stages, res, options)
    if "error" in res.result:
        err = res.result["error"]
        stages.append(Stage("run", "failed", res.seconds, err.get("message", "")[:500]))
        if err.get("kind") == "candidate":  # the candidate's code raised inside a step of the worker's own
            msg = f"the candidate's code raised: {err.get('type')}: {err.get('message', '')[:200]}"
            return _done(base, stages, "runtime_error", msg, detail=err.get("traceback", "")[-1500:])
        base.blame = "verifier"
        msg = f"verifier error: {err.get('type')}: {err.get('message', '')[:200]}"
        return _done(base, stages, "internal_error", msg, detail=err.get("traceback", "")[-1500:])
    try:
        facts = CandidateFacts.from_dict(res.result["facts"])
    except (KeyError, TypeError, ValueError, AttributeError) as e:  # a result in the wrong shape is not ours
        base.blame = "verifier"
        msg = f"the worker's result is malformed ({type(e).__name__}: {str(e)[:120]})"
        stages.append(Stage("run", "failed", res.seconds, msg))
        return _done(base, stages, "internal_error", msg)
    stages += _worker_stages(facts.stages)
    cstage, kernels = _compile_stage(facts, aot, device)
    stages.append(cstage)
    notes = list(pack.meta.get("notes", [])) + list(facts.notes)
    failure = facts.failure
    if facts.compile_only and not failure:
        return _cute_compile_only(base, stages, facts, notes, kernels)
    if cstage.status == "failed" and not (failure and cstage.details.get("not_compiled")):  # else the failure says why
        return _done(base, stages, "compile_error", cstage.message, detail=cstage.details.get("error", ""),
                     notes=notes, kernels=kernels)
    if failure and facts.blocked:  # the refusal, not the error it caused, is what the candidate did
        refused = "; ".join(sorted(set(facts.blocked))[:4])
        return _done(base, stages, "policy_violation", f"the sandbox refused: {refused}",
                     detail=f"{failure['message']}\nkernels must not touch files, the network, other processes, "
                            "threads or the interpreter", notes=notes, kernels=kernels)
    if failure:
        cpu_cute = device == "cpu" and cspec.backend == "cute" and failure.get("category") == "no_gpu"
        if not cpu_cute:
            category = failure["category"]
            if category not in R.CATEGORIES or R.verdict_of(category) != "rejected":  # a failure never passes
                category = "runtime_error"
            return _done(base, stages, category, failure["message"],
                         detail=_trim_traceback(failure.get("detail", ""), str(cand_path)), notes=notes,
                         kernels=kernels)
        return _cute_compile_only(base, stages, facts, notes, kernels)
    ceilings = load_ceilings(base.environment.get("gpu"))
    floor = physics_floor_ms(pack.meta.get("work") or {}, ceilings) if device == "cuda" else None
    uses_dot = "dot" in cspec.source  # tl.dot, cute's gemm: the precision hint names tl.dot only then
    judge = Judge(pack.refs, pack.meta, facts, Path(res.out_dir), physics_floor_ms=floor, uses_dot=uses_dot)
    judgement = judge.run()
    _judged_stages(stages, judgement)
    base.metrics.update(judgement.metrics)
    base.metrics["launches"] = (facts.launch_stats or {}).get("kernels", {})
    notes += judgement.notes
    _speed_metrics(base, pack, facts, ceilings, notes)
    if judgement.findings:
        first = min(judgement.findings, key=lambda f: R.CATEGORY_PRIORITY.index(f.category))
        return _done(base, stages, first.category, first.message, detail=first.detail, notes=notes, kernels=kernels)
    if device == "cpu":
        notes.append("speed was not measured: no GPU here (correctness ran under the Triton interpreter)")
    return _done(base, stages, "ok", f"correct on {judgement.metrics.get('trials', 0)} trials", notes=notes,
                 kernels=kernels)


def _cute_compile_only(base: Report, stages: list[Stage], facts: CandidateFacts, notes: list[str],
                       kernels: list[dict[str, Any]]) -> Report:
    """CuTe DSL on a machine without a GPU: compiled, never run, so the verdict is `unverified` (category
    `compile_only`), never an acceptance: no output was compared. Only the worker's own count of compiled
    launches it skipped is evidence (a forward that raises a no-GPU error of its own before reaching one
    compiled nothing, and is rejected)."""
    found = facts.compile_only or {}
    compile_stage = next((s for s in stages if s.name == "compile"), None)
    if compile_stage is not None and kernels:
        compile_stage.status, compile_stage.message = "passed", "compiled for sm_90a (no GPU)"
    if found.get("outcome") != "ok":
        note = found.get("note") or "forward reached no launch of a compiled CuTe DSL kernel"
        failure = facts.failure or {}
        detail = ""
        if failure:  # what stopped it first, e.g. a device query that needs a GPU
            note += f"; it failed first: {failure.get('message', '')}"
            detail = ("without a GPU only what compiles before the first launch can be checked: guard device "
                      "queries (SM counts, properties) with x.is_cuda\n" + failure.get("detail", "")[-1500:])
        return _done(base, stages, "no_kernel_launched", note, detail=detail, notes=notes, kernels=kernels)
    stages.append(Stage("correctness", "skipped", 0.0, "no GPU: CuTe DSL kernels have no interpreter"))
    notes.append("CuTe DSL candidate compiled for sm_90a; correctness was NOT run without a GPU")
    base.metrics["compile_only"] = True  # the category says it too; kept for readers of older reports
    return _done(base, stages, "compile_only", "compiled for sm_90a; correctness NOT run (no GPU)", notes=notes,
                 kernels=kernels)


def _judged_stages(stages: list[Stage], j: Judgement) -> None:
    for name in ("correctness", "integrity", "timing"):
        found = j.failed(name)
        existing = next((s for s in stages if s.name == name), None)
        status = "failed" if found else (existing.status if existing else "passed")
        msg = found[0].message if found else (existing.message if existing else "")
        details = {"trials": [_trial_summary(t) for t in j.trials]} if name == "correctness" else {}
        if existing:
            existing.status, existing.message = status, msg
            existing.details.update(details)
        elif name != "timing":
            stages.append(Stage(name, status, 0.0, msg, details))


def _trial_summary(t: Any) -> dict[str, Any]:
    return {"seed": t.trial["seed"], "set": t.trial["set"], "dist": t.trial["dist"], "ok": t.ok,
            "inputs": t.trial.get("input_desc", ""), "leaves": [leaf.summary() for leaf in t.leaves][:8]}


def _speed_metrics(base: Report, pack: Pack, facts: CandidateFacts, ceilings: dict[str, Any],
                   notes: list[str]) -> None:
    """Times, speedups with intervals (median and mean), and % of the roofline limit."""
    work = pack.meta.get("work") or {}
    base.metrics["flops"] = work.get("matmul_flops", 0) + work.get("other_flops", 0)
    base.metrics["min_bytes"] = work.get("min_bytes")
    timing = facts.timing
    if timing is not None and timing.error:
        notes.append(f"speed was not measured: {timing.error}")
        return
    cand = timing.candidate if timing is not None else None
    if not cand:
        return
    base.metrics.update(candidate_ms=cand["median_ms"], candidate_mean_ms=cand["mean_ms"],
                        candidate_iqr_ms=cand["q3_ms"] - cand["q1_ms"], candidate_max_ms=max(cand["samples_ms"]),
                        timing_method=cand["method"], host_ratio=cand.get("host_ratio"), timed_calls=timing.calls,
                        timing_draws=timing.draws, launch_host_ms=cand.get("launch_host_ms"),
                        timing_phases_s=cand.get("phases_s") or {})
    baseline = pack.meta.get("baseline") or {}
    for name in ("eager", "compile"):
        b = baseline.get(name)
        if not b or not b.get("samples_ms"):
            continue
        point, lo, hi = bootstrap_speedup(b["samples_ms"], cand["samples_ms"])
        mean_point, mean_lo, _ = bootstrap_speedup(b["samples_ms"], cand["samples_ms"], stat="mean")
        holds, why = speed_claim(point, mean_point)
        base.metrics[f"{name}_ms"] = b["median_ms"]
        base.metrics[f"speedup_{name}"] = point
        base.metrics[f"speedup_{name}_ci"] = [lo, hi]
        base.metrics[f"speedup_{name}_mean"] = mean_point
        base.metrics[f"faster_than_{name}"] = holds and lo > 1.0 and mean_lo > 1.0
        if why:
            notes.append(f"against {name}: {why}")
    fl = floor_ms(work, ceilings)
    base.metrics.update(roofline_bound=fl["bound"], roofline_floor_ms=fl["floor_ms"],
                        roofline_pct=percent_of_limit(cand["median_ms"], fl), ceilings_source=fl["ceilings_source"])


def _trim_traceback(detail: str, cand_path: str) -> str:
    """Keep the candidate's own frames and the final error lines of a traceback."""
    if not detail:
        return ""
    lines = detail.splitlines()
    keep, i = [], 0
    while i < len(lines):
        ln = lines[i]
        if ln.strip().startswith("File ") and cand_path in ln:
            keep.append(ln.replace(cand_path, "kernel.py"))
            if i + 1 < len(lines):
                keep.append(lines[i + 1])
            i += 2
            continue
        i += 1
    tail = [ln for ln in lines[-6:] if ln.strip() and not ln.strip().startswith("File ")]
    return "\n".join(keep[-8:] + tail)[-2000:]


def with_tool_stages(report: Report, tool_stages: list[Stage]) -> Report:
    """Add the profile / sanitize stages to an accepted report; a sanitizer finding rejects the kernel."""
    notes = []
    for st in tool_stages:
        report.stages.append(st)
        if st.name == "profile" and st.details.get("summary"):
            notes.append("Nsight Compute (one forward, clocks not locked):\n" + "\n".join(
                f"  {line}" for line in st.details["summary"]))
            report.metrics["profile"] = st.details["kernels"]
        if st.name == "sanitize" and st.status == "failed":
            racy = "racecheck" in st.message
            report.verdict, report.category = "rejected", "nondeterministic" if racy else "runtime_error"
            report.message = st.message
            first = next((r for r in st.details.values() if r.get("errors")), {})
            report.feedback = build_feedback(report, detail="\n".join(first.get("findings", [])))
            return report
    if notes:
        report.feedback += "\n\n" + "\n".join(notes)
    return report


def reject_early(base: Report, stages: list[Stage], category: str, message: str, detail: str = "") -> Report:
    """A verdict reached before any worker ran (load, backend, static policy)."""
    return _done(base, stages, category, message, detail=detail)
