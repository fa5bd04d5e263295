"""Verifier worker process: `python -m kernelagent.verifier.worker WORKDIR`.

Isolates itself (network namespace, audit hook), imports torch and triton, then blocks on one JSON
request on stdin; serves it (role `reference`, `candidate` or `aot`), writes `out/result.json` and
exits without running any exit handlers a candidate may have registered. One request per process.
Imports only the standard library, torch, triton and (for CuTe DSL) cutlass.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path


def _wait_for_gpu_turn(workdir: Path, limit: float = 900.0) -> None:
    """A pooled GPU worker imports while another worker may be timing a kernel; it makes its CUDA context
    and warms its compiler only when the parent says the GPU is quiet (sandbox.pool.WorkerPool.warm)."""
    from kernelagent.verifier.protocol import GPU_TURN_FILE, IMPORTED_FILE

    if os.environ.get("KERNELAGENT_WORKER_GPU_TURN") != "1":
        return
    (workdir / IMPORTED_FILE).write_text("")
    deadline = time.monotonic() + limit
    while not (workdir / GPU_TURN_FILE).exists():
        if time.monotonic() > deadline:
            os._exit(0)  # the parent is gone or forgot this worker
        time.sleep(0.01)


def _warm_imports(mode: str, workdir: Path) -> dict[str, str]:
    # torch._dynamo is not imported (seconds on a cold worker): the verifier's dispatch modes opt out of
    # its wrapper, and the rebinding its import makes is recognised by guard.changed_since
    import torch

    versions = {"torch": torch.__version__, "python": sys.version.split()[0]}
    try:
        import triton
        versions["triton"] = triton.__version__
    except ImportError:
        versions["triton"] = ""
    helper = _start_triton_driver() if mode == "cuda" and versions["triton"] else None
    if mode == "cpu" and versions["triton"]:
        from kernelagent.verifier.worker.interp_fixes import (
            autotune_without_benchmarks,
            bf16_dot_in_fp32,
            casts_and_ints_as_compiled,
            keep_kernel_modules_clean,
            print_to_the_real_stderr,
            rewrite_what_the_compiler_compiles,
            round_bf16_to_nearest,
        )
        versions["interpreter_bf16_rounding"] = "nearest" if round_bf16_to_nearest() else "truncate"
        versions["interpreter_bf16_dot"] = "fp32" if bf16_dot_in_fp32() else "raw"
        versions["interpreter_autotune"] = "first config" if autotune_without_benchmarks() else "benchmarks"
        versions["interpreter_module_globals"] = "kept clean" if keep_kernel_modules_clean() else "shared"
        versions["interpreter_source"] = "as compiled" if rewrite_what_the_compiler_compiles() else "re-read"
        versions["interpreter_device_print"] = "fd 2" if print_to_the_real_stderr() else "sys.stdout"
        versions["interpreter_casts"] = "as compiled" if casts_and_ints_as_compiled() else "numpy"
    warming = bool(versions["triton"]) and os.environ.get("KERNELAGENT_WORKER_WARM") == "1"
    if mode == "cuda":
        import kernelagent.verifier.worker.candidate  # noqa: F401 - trusted modules, while the C compiler runs
        if warming and torch.cuda.is_available():  # host work (the compilers): before the GPU turn
            helper = _joined(helper, versions)
            versions["warmup_ahead"] = _never_fatal("compile_ahead")
        _wait_for_gpu_turn(workdir)  # also with no GPU visible: the parent waits for the word either way
    if mode == "cuda" and torch.cuda.is_available():
        torch.zeros(1, device="cuda")  # create the context (while the driver helper builds, if it still does)
        versions["gpu"] = torch.cuda.get_device_name()
        versions["capability"] = "sm_{}{}".format(*torch.cuda.get_device_capability())
        versions["cuda"] = torch.version.cuda or ""
    _joined(helper, versions)
    if warming and mode in ("cuda", "cpu"):  # launch one trusted kernel while idle
        versions["warmup"] = _never_fatal("warm", "cuda" if mode == "cuda" else "cpu")
    return versions


def _joined(helper: threading.Thread | None, versions: dict[str, str]) -> None:
    """Wait for the driver helper's build (if one runs) and note how it went; returns None (no helper left)."""
    if helper is not None:
        helper.join()
        versions["triton_driver"] = helper.name
    return None


def _never_fatal(name: str, *args: str) -> dict[str, object]:
    """Run warmup.`name`(*args); a failure is noted, never raised (the candidate's own launch reports it)."""
    try:
        from kernelagent.verifier.worker import warmup
        return getattr(warmup, name)(*args)
    except Exception as e:  # noqa: BLE001
        return {"ok": False, "error": f"{type(e).__name__}: {str(e)[:200]}"}


def _start_triton_driver() -> threading.Thread:
    """Triton builds its driver helper with the C compiler on first use (a second or more on a cold
    worker, in this worker's own cache): start that now, in a thread, while the CUDA context is made.
    The thread ends before any candidate code exists here; its name says how it went."""
    def build() -> None:
        t = time.perf_counter()
        try:
            from triton.runtime import driver
            driver.active.utils  # noqa: B018 - building the helper is the point
            threading.current_thread().name = f"ok {time.perf_counter() - t:.3f}s"
        except Exception as e:  # noqa: BLE001 - the candidate's own launch will report it properly
            threading.current_thread().name = f"failed: {type(e).__name__}: {str(e)[:200]}"

    thread = threading.Thread(target=build, name="running", daemon=True)
    thread.start()
    return thread


def _serve(raw: dict, state: object, workdir: Path) -> dict:
    """Run one typed request (protocol.decode_request) and return what goes into result.json."""
    from kernelagent.verifier import protocol as P

    req = P.decode_request(raw)
    if req.role is P.Role.REFERENCE:
        from kernelagent.verifier.reference.run import run_reference
        return {"meta": run_reference(req)}
    if req.role is P.Role.MATCH:
        from kernelagent.verifier.reference.matching import run_match
        return {"match": run_match(req)}
    state.deny_read = [os.path.realpath(p) for p in req.deny_read]
    if req.role is P.Role.CANDIDATE:
        from kernelagent.verifier.worker.candidate import CandidateRunner
        return {"facts": CandidateRunner(req, state).run().to_dict()}
    if req.role is P.Role.SINGLE:
        from kernelagent.verifier.worker.candidate import run_single
        return {"single": run_single(req, state)}
    from kernelagent.verifier.worker.aot import run_aot
    return {"aot": run_aot(req, state)}


def _read_request(workdir: Path) -> str:
    """The request line: from stdin, or (under a tool that may not pass stdin on) from the file the
    parent writes beside the work dir, read and removed before any candidate code exists here."""
    if os.environ.get("KERNELAGENT_WORKER_REQUEST") != "file":
        return sys.stdin.readline()
    path = Path(f"{workdir}-out") / "request.json"
    while not path.exists():  # the parent's timeout bounds the wait
        time.sleep(0.02)
    line = path.read_text()
    path.unlink()
    return line


def _first_for_the_oom_killer() -> None:
    """When memory runs out, the kernel should kill a worker, never the caller (kernelagent itself)."""
    try:
        Path("/proc/self/oom_score_adj").write_text("1000")
    except OSError:
        pass


def main() -> None:
    workdir = Path(sys.argv[1]).resolve()
    mode = os.environ.get("KERNELAGENT_WORKER_MODE", "cpu")
    _first_for_the_oom_killer()
    from kernelagent.verifier.sandbox import confine
    from kernelagent.verifier.worker import guard

    settings = confine.Settings.from_env()
    netns = ""
    if settings.level == "off":  # unconfined (tests only): today's private network namespace, where allowed
        netns = guard.isolate_network() if os.environ.get("KERNELAGENT_WORKER_NETNS") != "0" else "kept for a profiler"
    state = guard.GuardState(workdir=str(workdir))
    if settings.tripwires:  # Python-level tripwires; only tests of the OS walls alone turn them off
        guard.install_audit_hook(state)
        guard.install_thread_guard(state)
        guard.install_exec_guard()
    # the OS walls: before the imports where nothing needs more (no thread exists yet), else after CUDA's
    # set-up; always before the request is read and any candidate code exists
    walls = confine.enter(workdir, settings) if confine.restrict_early(mode) else None
    t0 = time.perf_counter()
    env = _warm_imports(mode, workdir)
    import_seconds = round(time.perf_counter() - t0, 3)
    walls = walls or confine.enter(workdir, settings)
    env.update(mode=mode, sandbox_network=netns or confine.network_note(walls), import_seconds=import_seconds,
               confinement=walls)
    # what applied, read by the parent before any candidate code can exist in this process; renamed into
    # place whole: the parent reads it as soon as the name exists (a half-written file read as {} once
    # left a report without its confinement, CI under load)
    (workdir / "ready.part").write_text(json.dumps(walls, default=str))
    os.replace(workdir / "ready.part", workdir / "ready")
    line = _read_request(workdir)
    if not line.strip():
        os._exit(0)
    req = json.loads(line)
    nonce = req.pop("nonce", "")  # echoed in the result: a result.json the candidate forged lacks it
    out_dir = Path(req.get("out_dir") or f"{workdir}-out")
    out_dir.mkdir(parents=True, exist_ok=True)
    state.out_dir = os.path.realpath(out_dir)
    state.in_dir = os.path.realpath(req["in_dir"]) if req.get("in_dir") else ""
    t1 = time.perf_counter()
    try:
        result = _serve(req, state, workdir)
    except Exception as e:  # noqa: BLE001 - reported to the parent, which assigns blame
        from kernelagent.problem import ProblemError
        from kernelagent.verifier.worker.errors import passes_through
        kind = "problem" if isinstance(e, ProblemError) else "internal"
        if kind == "internal" and passes_through(e, str(req.get("candidate") or "")):
            kind = "candidate"  # candidate code ran under the verifier's own step (a __deepcopy__, a __repr__)
        result = {"error": {"kind": kind, "type": type(e).__name__, "message": str(e)[:4000],
                            "traceback": traceback.format_exc()[-6000:]}}
    result["environment"] = env
    result["seconds"] = round(time.perf_counter() - t1, 3)
    result["nonce"] = nonce
    state.active = False
    tmp = out_dir / "result.json.tmp"
    tmp.write_text(json.dumps(result, default=str))
    tmp.replace(out_dir / "result.json")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
