"""`verify(problem, candidate, options) -> Report`: the verifier's entry point (parent process).

Stages: load and policy here (AST only, the candidate is never imported in this process); the
reference pack in one worker; the candidate in another; compile facts (AOT on CPU) in a third;
the comparison and the verdict back here, from the tensors the workers saved.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelagent.problem import (
    CandidateSpec,
    ProblemError,
    ProblemSpec,
    inspect_candidate,
    inspect_problem,
    static_signature_mismatch,
)
from kernelagent.verifier import report as R
from kernelagent.verifier.judge.feedback import build_feedback
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.policy.check import check_policy
from kernelagent.verifier.report import Report, Stage
from kernelagent.verifier.sandbox.pool import Worker, WorkerPool, WorkerResult
from kernelagent.verifier.sandbox.spawn import redact, scratch_base, secret_values, sweep_stale

Progress = Callable[[str], None]


class ReferenceFailure(Exception):
    """The problem (not the candidate) could not be run; carries a ready report."""

    def __init__(self, report: Report):
        super().__init__(report.message)
        self.report = report


@dataclass
class Pack:
    dir: Path
    meta: dict[str, Any]
    environment: dict[str, Any]
    seconds: float
    ref_dir: Path | None = None

    @property
    def refs(self) -> Path:
        return self.ref_dir or self.dir / "ref"


def resolve_device(device: str) -> str:
    if device in ("cpu", "cuda"):
        if device == "cuda" and not _cuda_available():
            raise ValueError("--device cuda was asked for, but no CUDA GPU is visible")
        return device
    return "cuda" if _cuda_available() else "cpu"


def _cuda_available() -> bool:
    import torch
    return bool(torch.cuda.is_available())


class Verifier:
    """Verifies candidates against problems; reuses reference packs and warm workers across calls."""

    def __init__(self, options: VerifyOptions | None = None, pool: WorkerPool | None = None):
        self.options = options or VerifyOptions()
        self.device = resolve_device(self.options.device)
        self.pool = pool or WorkerPool(size=0)
        self._packs: dict[str, Pack] = {}
        sweep_stale()
        # one folder per verifier, not per process: closing one verifier must not take another's packs
        self.scratch = scratch_base() / f"kernelagent-{os.getpid()}-{secrets.token_hex(4)}"

    def close(self) -> None:
        self.pool.close()
        if not self.options.keep_workdir:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> Verifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the reference pack ------------------------------------------------------------------------
    def pack_key(self, spec: ProblemSpec) -> str:
        o = self.options
        return f"{spec.sha256[:16]}-{self.device}-{o.secret}-{o.seeds}-{o.cpu_max_elements}-{int(o.timing)}"

    def reference(self, spec: ProblemSpec, worker: Worker | None = None) -> Pack:
        key = self.pack_key(spec)
        if key in self._packs:
            if worker is not None:
                worker.discard()
            return self._packs[key]
        pack_dir = self.scratch / "packs" / key
        pack_dir.mkdir(parents=True, exist_ok=True)
        ref_dir = self.scratch / "refs" / secrets.token_hex(16)
        worker = worker or self.pool.acquire(self.device)
        req = {"role": "reference", "problem": str(Path(spec.path).resolve()), "device": self.device,
               "secret": self.options.secret, "seeds": self.options.seeds, "pack_dir": str(pack_dir),
               "ref_dir": str(ref_dir),
               "cpu_max_elements": self.options.cpu_max_elements, "timing": self.options.timing}
        res = worker.run(req, self.options.timeout * 2, self.options.memory_limit_mb)
        worker.discard(self.options.keep_workdir)
        env = res.result.get("environment", {})
        if res.status != "ok" or "error" in res.result:
            raise ReferenceFailure(_reference_report(spec, res))
        meta = res.result["meta"]
        meta["device"] = self.device
        pack = Pack(pack_dir, meta, env, res.seconds, ref_dir)
        self._packs[key] = pack
        return pack

    # -- one candidate ----------------------------------------------------------------------------
    def verify(self, problem: str | Path, candidate: str | Path, progress: Progress | None = None) -> Report:
        t0 = time.perf_counter()
        say = progress or (lambda _msg: None)
        stages: list[Stage] = []
        try:
            pspec = inspect_problem(problem)
        except ProblemError as e:
            return _finish(R.rejected("load_error", str(e), blame="problem",
                                      stages=[Stage("load", "failed", 0.0, str(e))]), t0)
        base = Report(problem={"path": str(problem), "name": pspec.name, "sha256": pspec.sha256})
        try:
            cspec = inspect_candidate(candidate)
        except ProblemError as e:
            return self._reject(base, stages + [Stage("load", "failed", 0.0, str(e))], "load_error", str(e), t0)
        base.candidate = {"path": str(candidate), "sha256": cspec.sha256, "backend": cspec.backend}
        mismatch = static_signature_mismatch(pspec.source, cspec.source)
        if mismatch:
            return self._reject(base, [Stage("load", "failed", 0.0, mismatch)], "load_error", mismatch, t0)
        stages.append(Stage("load", "passed", round(time.perf_counter() - t0, 4)))
        policy = check_policy(cspec.source, str(candidate))
        pstage = Stage("policy", "passed" if policy.ok else "failed", 0.0,
                       details={"findings": [f.__dict__ for f in policy.findings]})
        if not self.options.static_policy:
            pstage.status, pstage.message = "skipped", "static policy disabled (sandbox test mode)"
        stages.append(pstage)
        if not policy.ok and self.options.static_policy:
            first = (policy.violations or policy.suspects)[0]
            msg = f"line {first.line} [{first.rule}]: {first.message}"
            return self._reject(base, stages, "policy_violation", msg, t0, detail=policy.summary())
        say("running the reference")
        cand_worker = self.pool.acquire(self.device)
        aot_worker = self.pool.acquire("aot") if self.device == "cpu" and cspec.backend == "triton" else None
        try:
            pack = self.reference(pspec)
        except ReferenceFailure as e:
            cand_worker.discard()
            if aot_worker:
                aot_worker.discard()
            e.report.stages = stages + e.report.stages
            return _finish(e.report, t0)
        stages.append(Stage("reference", "passed", round(pack.seconds, 3),
                            details={"trials": len(pack.meta["trials"]), "notes": pack.meta.get("notes", [])}))
        say("running the candidate")
        return self._run_candidate(base, stages, pspec, cspec, pack, cand_worker, aot_worker, t0)

    def _run_candidate(self, base: Report, stages: list[Stage], pspec: ProblemSpec, cspec: CandidateSpec,
                       pack: Pack, worker: Worker, aot_worker: Worker | None, t0: float) -> Report:
        from kernelagent.verifier.judge.verdict import decide

        cand_path = worker.workdir / f"candidate_{cspec.sha256[:12]}.py"
        cand_path.write_text(cspec.source)
        req = {"role": "candidate", "candidate": str(cand_path), "pack_dir": str(pack.dir),
               "device": self.device, "secret": self.options.secret, "backend": cspec.backend,
               "timing": self.options.timing, "deny_read": self._deny_read(pspec, pack)}
        t_run = time.perf_counter()
        res = worker.run(req, self.options.timeout, self.options.memory_limit_mb)
        t_aot = time.perf_counter()
        aot = None
        if aot_worker is not None:
            aot = self._aot(aot_worker, cspec, res, pspec, pack)
        t_judge = time.perf_counter()
        report = decide(base, stages, res, aot, pack, cspec, cand_path, self.options)
        report.metrics["cost_seconds"] = _cost(t0, t_run, t_aot, t_judge, res)
        report.metrics["cost_seconds"]["judge_load"] = report.metrics.pop("judge_load_seconds", 0.0)
        report.metrics["cost_notes"] = _cost_notes(res)
        worker.discard(self.options.keep_workdir)
        if report.accepted and self.device == "cuda" and (self.options.profile or self.options.sanitize):
            from kernelagent.verifier.measure.tools_stage import run_gpu_tools
            run_gpu_tools(self, report, pspec, cspec, pack)
        return _finish(report, t0)

    def _aot(self, worker: Worker, cspec: CandidateSpec, res: WorkerResult, pspec: ProblemSpec,
             pack: Pack) -> dict[str, Any] | None:
        requests = ((res.result.get("facts") or {}).get("compile") or {}).get("aot_requests") or []
        if not requests:
            worker.discard()
            return None
        path = worker.workdir / f"candidate_{cspec.sha256[:12]}.py"
        path.write_text(cspec.source)
        out = worker.run({"role": "aot", "candidate": str(path), "requests": requests,
                          "deny_read": self._deny_read(pspec, pack)}, self.options.timeout,
                         self.options.memory_limit_mb)
        worker.discard(self.options.keep_workdir)
        if out.status != "ok":
            return {"error": None, "kernels": [], "skipped": [f"AOT worker {out.status}: {out.died_how}"]}
        return out.result.get("aot") or out.result.get("error")

    def single_run(self, cspec: CandidateSpec, pspec: ProblemSpec, pack: Pack, prefix: list[str],
                   main_set: bool = True, extra_env: dict[str, str] | None = None) -> WorkerResult:
        """One candidate forward in a worker started under a tool (ncu, compute-sanitizer)."""
        from kernelagent.verifier.sandbox.spawn import make_workdir

        # the tool's injected library reports to its front end over sockets, which a fresh network
        # namespace would cut (the run then hangs); the audit hook still refuses the candidate's sockets
        env = {**(extra_env or {}), "KERNELAGENT_WORKER_NETNS": "0"}
        worker = Worker(self.device, prefix=prefix, workdir=make_workdir(), extra_env=env)
        path = worker.workdir / f"candidate_{cspec.sha256[:12]}.py"
        path.write_text(cspec.source)
        req = {"role": "single", "candidate": str(path), "pack_dir": str(pack.dir), "device": self.device,
               "secret": self.options.secret, "main_set": main_set, "deny_read": self._deny_read(pspec, pack)}
        res = worker.run(req, self.options.timeout * 4, self.options.memory_limit_mb)
        worker.discard(self.options.keep_workdir)
        return res

    def _deny_read(self, pspec: ProblemSpec, pack: Pack) -> list[str]:
        home = Path.home()
        ka_home = Path(os.environ.get("KERNELAGENT_HOME") or home / ".kernelagent")
        kernels = Path(__file__).resolve().parents[1] / "kernels"
        return [str(self.scratch / "refs"), str(pack.refs), str(Path(pspec.path).resolve()), str(ka_home), str(kernels),
                str(home / ".ssh"), str(home / ".aws"), str(home / ".config"), str(home / ".netrc"),
                str(home / ".anthropic")]

    def _reject(self, base: Report, stages: list[Stage], category: str, message: str, t0: float,
                detail: str = "") -> Report:
        base.verdict, base.category, base.message, base.stages = "rejected", category, message, stages
        base.feedback = build_feedback(base, detail=detail)
        return _finish(base, t0)


def _reference_report(spec: ProblemSpec, res: WorkerResult) -> Report:
    err = res.result.get("error") or {}
    if res.status != "ok":
        msg = f"the reference worker {res.status} ({res.died_how}) while running {spec.path}"
        category = "timeout" if res.status == "timeout" else "runtime_error"
        detail = res.stderr_tail[-1500:]
    elif err.get("kind") == "problem":
        category, msg, detail = "load_error", err["message"], ""
    else:
        category = "internal_error"
        msg = f"running the reference failed: {err.get('type')}: {err.get('message', '')[:300]}"
        detail = err.get("traceback", "")
    rep = R.rejected(category, msg, blame="problem" if category != "internal_error" else "verifier",
                     problem={"path": spec.path, "name": spec.name, "sha256": spec.sha256},
                     stages=[Stage("reference", "failed", round(res.seconds, 3), msg, {"detail": detail[-3000:]})])
    rep.feedback = build_feedback(rep, detail=detail[-1500:])
    return rep


def _cost(t0: float, t_run: float, t_aot: float, t_judge: float, res: WorkerResult) -> dict[str, float]:
    """Where a verification's own time went: before the candidate worker ran (inspection, policy,
    reference pack), waiting for the worker (its imports if it was not ready yet, then its work), the
    work itself, the AOT worker, and the judge (loading the saved tensors and comparing)."""
    served = float(res.result.get("seconds") or 0.0)
    io = ((res.result.get("facts") or {}).get("io")) or {}
    now = time.perf_counter()
    return {"before_worker": round(t_run - t0, 3), "worker_wall": round(t_aot - t_run, 3),
            "worker_served": served, "worker_waiting": round(max(0.0, t_aot - t_run - served), 3),
            "worker_import": float((res.result.get("environment") or {}).get("import_seconds") or 0.0),
            "worker_pack_load": float(io.get("load_seconds") or 0.0),
            "worker_saving": float(io.get("save_seconds") or 0.0),
            "aot": round(t_judge - t_aot, 3), "judge": round(now - t_judge, 3)}


def _cost_notes(res: WorkerResult) -> dict[str, object]:
    """What explains a slow worker: modules the candidate's run imported late (torch._dynamo costs
    seconds), how the parallel Triton driver build went."""
    env, facts = res.result.get("environment") or {}, res.result.get("facts") or {}
    return {"late_imports": facts.get("late_imports") or [], "triton_driver": env.get("triton_driver", "")}


def _finish(report: Report, t0: float) -> Report:
    """Time the verification and scrub the caller's secrets from everything the candidate could echo."""
    report.metrics.setdefault("verify_seconds", round(time.perf_counter() - t0, 3))
    found = secret_values()
    if found:
        text = json.dumps(report.to_dict(), default=str)
        clean = redact(text, found)
        if clean != text:
            report = Report.from_dict(json.loads(clean))
    return report


def verify(problem: str | Path, candidate: str | Path, options: VerifyOptions | None = None,
           progress: Progress | None = None) -> Report:
    """Verify one candidate against one problem with fresh workers (the CLI's `verify`)."""
    with Verifier(options) as v:
        return v.verify(problem, candidate, progress)


def report_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, default=str)
