"""The batch runner: what is left to do, local shards or Ray, and every result written as it arrives."""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelagent.memory import batches as B
from kernelagent.memory.store import Store, problem_hash, source_sha256
from kernelagent.tools.batch.discover import BatchProblem
from kernelagent.tools.batch.options import BatchError, BatchOptions, Progress
from kernelagent.tools.batch.ray_tasks import import_ray, payload, ray_init, ray_verify_problem
from kernelagent.tools.batch.shards import Shard, shard_plan, shard_prepare, shard_verify


@dataclass
class _Work:
    problem: BatchProblem
    pid: str
    candidates: list[Path]


class BatchRunner:
    """Runs a batch to the end (or continues it), writing every result into the store as it arrives."""

    def __init__(self, store: Store, problems: list[BatchProblem], opts: BatchOptions,
                 progress: Progress | None = None, provider: Any = None):
        if not problems:
            raise BatchError("no problem files found (a problem defines `class Model` and `def get_inputs`)")
        if opts.mode not in ("verify", "optimize"):
            raise BatchError(f"--mode must be verify or optimize, not {opts.mode!r}")
        if opts.mode == "optimize" and provider is None:
            raise BatchError("--mode optimize needs an LLM provider")
        self.store, self.problems, self.opts, self.provider = store, problems, opts, provider
        self.emit = progress or (lambda _event: None)
        self.stop = threading.Event()
        self._lock = threading.Lock()
        try:
            self.batch_id, self.resumed = B.open_batch(store, mode=opts.mode, options=opts.identity(),
                                                       inputs=[str(p.path) for p in problems], new=opts.new,
                                                       resume=opts.resume)
        except LookupError as e:
            raise BatchError(str(e)) from e

    def run(self) -> dict[str, Any]:
        """Do what is left, then return (and store) the summary."""
        work = self._todo()
        total = sum(max(1, len(p.candidates)) if self.opts.mode == "verify" else 1 for p in self.problems)
        left = sum(len(w.candidates) for w in work) if self.opts.mode == "verify" else len(work)
        self.emit({"event": "plan", "batch_id": self.batch_id, "resumed": self.resumed, "total": total,
                   "done": total - left, "problems": len(self.problems), "mode": self.opts.mode})
        if work:
            if self.opts.ray:
                self._run_ray(work)
            else:
                self._run_local(work)
        summary = B.summary_of(self.store, self.batch_id)
        if not self.stop.is_set():
            B.finish_batch(self.store, self.batch_id, summary)
        return summary

    def _todo(self) -> list[_Work]:
        done, work = B.done_keys(self.store, self.batch_id), []
        for p in self.problems:
            pid = problem_hash(p.path.read_text(encoding="utf-8"))
            if self.opts.mode == "optimize":
                if (pid, "") not in done:
                    work.append(_Work(p, pid, []))
            elif not p.candidates:
                if (pid, "") not in done:
                    B.record_item(self.store, batch_id=self.batch_id, problem_path=p.path, problem_name=p.name,
                                  status=B.NO_CANDIDATE)
            else:
                todo = [c for c in p.candidates if (pid, source_sha256(c.read_text(encoding="utf-8"))) not in done]
                if todo:
                    work.append(_Work(p, pid, todo))
        return work

    # -- local shards -----------------------------------------------------------------------------

    def _run_local(self, work: list[_Work]) -> None:
        plan = shard_plan(self.opts)
        shards = [Shard(label, visible, self.opts.verify_options(device)) for label, visible, device in plan]
        self.emit({"event": "shards", "shards": [s.label for s in shards]})
        todo: queue.Queue[_Work] = queue.Queue()
        for w in work:
            todo.put(w)
        # verify: one thread per shard (a shard verifies one candidate at a time anyway); optimize: the
        # agents wait on the LLM most of the time, so several share a shard and their calls queue there
        jobs = len(shards) if self.opts.mode == "verify" else (self.opts.jobs or 4 * len(shards))
        threads = [threading.Thread(target=self._drain, args=(todo, shards, i), daemon=True) for i in range(jobs)]
        try:
            for t in threads:
                t.start()
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(0.2)
        except KeyboardInterrupt:
            self.stop.set()
            raise
        finally:
            for s in shards:
                s.close(wait=not self.stop.is_set())

    def _pick(self, shards: list[Shard], index: int) -> Shard:
        """Verify mode: thread i owns shard i. Optimize mode: the shard with the fewest problems in flight."""
        with self._lock:
            shard = shards[index] if self.opts.mode == "verify" else min(shards, key=lambda s: s.active)
            shard.active += 1
        return shard

    def _drain(self, todo: queue.Queue[_Work], shards: list[Shard], index: int) -> None:
        while not self.stop.is_set():
            try:
                w = todo.get_nowait()
            except queue.Empty:
                return
            shard = self._pick(shards, index)
            try:
                if self.opts.mode == "verify":
                    self._verify_problem(w, shard)
                else:
                    self._optimize_problem(w, shard)
            finally:
                with self._lock:
                    shard.active -= 1

    def _verify_problem(self, w: _Work, shard: Shard) -> None:
        for cand in w.candidates:
            if self.stop.is_set():
                return
            self.emit({"event": "start", "shard": shard.label, "problem": w.problem.name, "candidate": cand.name})
            t0 = time.monotonic()
            try:
                report = shard.call(shard_verify, str(w.problem.path), str(cand))
            except BrokenProcessPool as e:
                self._left(shard, w, cand, f"the shard process died ({e})")
                continue
            except Exception as e:  # noqa: BLE001 - a verifier bug on one item must not stop the batch
                self._left(shard, w, cand, f"the verifier raised {type(e).__name__}: {str(e)[:300]}")
                continue
            self._record(w, cand, report, shard.label, time.monotonic() - t0)

    def _left(self, shard: Shard, w: _Work, cand: Path, why: str) -> None:
        """An item the batch could not finish: said, not recorded, so a rerun tries it again."""
        self.emit({"event": "error", "shard": shard.label, "problem": w.problem.name, "candidate": cand.name,
                   "message": f"{why}; left for a rerun"})

    def _record(self, w: _Work, cand: Path, report: dict[str, Any], worker: str, seconds: float,
                source: str | None = None) -> None:
        source = source if source is not None else cand.read_text(encoding="utf-8")
        aid = B.record_verification(self.store, problem_path=w.problem.path, problem_name=w.problem.name,
                                    candidate_source=source, report=report, batch_id=self.batch_id,
                                    candidate_path=str(cand), worker=worker, seconds=seconds)
        metrics = report.get("metrics") or {}
        self.emit({"event": "done", "shard": worker, "problem": w.problem.name, "candidate": cand.name,
                   "attempt_id": aid, "verdict": report.get("verdict"), "category": report.get("category"),
                   "speedup": metrics.get("speedup_eager"), "seconds": round(seconds, 2)})

    # -- optimize mode ----------------------------------------------------------------------------

    def _optimize_problem(self, w: _Work, shard: Shard) -> None:
        from kernelagent.agent import OptimizeConfig, optimize
        from kernelagent.agent.errors import AgentError
        from kernelagent.problem import ProblemError

        self.emit({"event": "start", "shard": shard.label, "problem": w.problem.name, "candidate": ""})
        prior = B.problem_run(self.store, self.batch_id, w.pid)
        out = Path(self.opts.out_dir or self.store_home() / "batches" / self.batch_id)
        out.mkdir(parents=True, exist_ok=True)
        config = OptimizeConfig(**{**self.opts.optimize, "backend": self.opts.backend,
                                   "out": str(out / f"{w.problem.name}_{self.opts.backend}.py")})
        t0 = time.monotonic()
        try:
            result = optimize(None if prior else str(w.problem.path), None if prior else config,
                              self._deps(shard, w), resume=prior)
        except (AgentError, ProblemError) as e:
            self.emit({"event": "error", "shard": shard.label, "problem": w.problem.name, "candidate": "",
                       "message": str(e)})
            return
        best = result.best or {}
        verdict = "accepted" if result.accepted else B.UNVERIFIED if result.unverified else "rejected"
        B.record_item(self.store, batch_id=self.batch_id, problem_path=w.problem.path, problem_name=w.problem.name,
                      status=result.status, run_id=result.run_id, attempt_id=best.get("attempt_id"),
                      verdict=verdict, category="ok" if result.accepted else result.status, worker=shard.label,
                      seconds=time.monotonic() - t0)
        self.emit({"event": "done", "shard": shard.label, "problem": w.problem.name, "candidate": "",
                   "verdict": verdict, "category": result.status, "speedup": best.get("speedup"),
                   "run_id": result.run_id})

    def store_home(self) -> Path:
        from kernelagent.memory.store import default_home

        return default_home()

    def _deps(self, shard: Shard, w: _Work) -> Any:
        from kernelagent.agent.deps import Deps
        from kernelagent.tools.optimize import retrieve_with_library
        from kernelagent.verifier.options import VerifyOptions
        from kernelagent.verifier.report import Report

        def verify_fn(problem: str, candidate: str, _options: Any = None) -> Report:
            return Report.from_dict(shard.call(shard_verify, problem, candidate))

        def progress(event: dict[str, Any]) -> None:
            if event.get("event") == "start" and event.get("run_id"):
                self.store.update_run(event["run_id"], batch_id=self.batch_id, problem_path=str(w.problem.path))
            self.emit({**event, "event": f"agent.{event.get('event')}", "shard": shard.label,
                       "problem": w.problem.name})

        return Deps(provider=self.provider, verify_fn=verify_fn, store=self.store,
                    prepare_fn=lambda problem: shard.call(shard_prepare, problem),
                    retrieve_fn=retrieve_with_library, progress=progress,
                    verify_options=VerifyOptions(**self.opts.verify_options(shard.options["device"])))

    # -- Ray --------------------------------------------------------------------------------------

    def _run_ray(self, work: list[_Work]) -> None:
        if self.opts.mode != "verify":
            raise BatchError("--ray runs --mode verify; run --mode optimize without --ray (LLM calls are "
                             "concurrent there, verification pinned per GPU)")
        ray = import_ray()
        started = ray_init(ray, self.opts)
        try:
            gpus = ray.cluster_resources().get("GPU", 0) if self.opts.device != "cpu" else 0
            device = "cuda" if gpus else "cpu"
            task = ray.remote(ray_verify_problem).options(num_gpus=1 if gpus else 0, num_cpus=1, max_retries=0)
            self.emit({"event": "shards", "shards": [f"ray:{'gpu' if gpus else 'cpu'}"]})
            options = self.opts.verify_options(device)
            pending = {task.remote(payload(w.problem.path, w.candidates), options): w for w in work}
            for w in work:
                self.emit({"event": "start", "shard": "ray", "problem": w.problem.name, "candidate": ""})
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                self._ray_results(ray, ready[0], pending.pop(ready[0]))
        finally:
            if started:
                ray.shutdown()

    def _ray_results(self, ray: Any, ref: Any, w: _Work) -> None:
        try:
            results = ray.get(ref)
        except ray.exceptions.RayError as e:
            self.emit({"event": "error", "shard": "ray", "problem": w.problem.name, "candidate": "",
                       "message": f"Ray task failed: {str(e)[:300]}; left for a rerun"})
            return
        by_name = {c.name: c for c in w.candidates}
        for r in results:
            cand = by_name[r["candidate"]]
            self._record(w, cand, r["report"], r["worker"], r["seconds"], source=r["source"])
