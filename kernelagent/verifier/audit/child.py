"""The audit child: `python -m kernelagent.verifier.audit.child`, one problem per process.

It asks the kernel's OOM killer to pick it first (oom_score_adj 1000, so the parent is never the one
killed), keeps the protocol on a private copy of stdout (the problem's own prints go to stderr), loads
the problem, sizes it on the meta device and reports the size and the memory estimate; it runs the
audit only once the parent answers `go` (the parent admits problems while their estimates fit).
Lines it writes: {"event": "sized", ...} then {"event": "result", "status": ok|error|oom|internal, ...}.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
import time
import traceback
from typing import IO, Any

OOM_SCORE_ADJ = 1000
PR_SET_PDEATHSIG = 1


def _be_the_oom_victim() -> bool:
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(OOM_SCORE_ADJ))
        return True
    except OSError:
        return False


def _die_with_the_parent() -> None:
    """SIGKILL this child when the process that started it goes (Linux); exit now if it already went."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    parent = os.environ.get("KERNELAGENT_AUDIT_PARENT")
    if parent and parent.isdigit() and os.getppid() != int(parent):
        os._exit(0)


def _protocol_stream() -> IO[str]:
    """A private copy of stdout for the protocol; fd 1 then points at stderr for whatever the problem prints."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    return proto


def _send(proto: IO[str], message: dict[str, Any]) -> None:
    proto.write(json.dumps(message, default=str) + "\n")
    proto.flush()


def _sized(problem: Any, settings: Any) -> tuple[dict[str, Any], Any, int]:
    import torch

    from kernelagent.verifier.audit.sizing import size_problem
    from kernelagent.verifier.estimate import audit_peak

    sizes, sets = size_problem(problem, settings.seed)
    est = audit_peak(sizes, settings.device, float64=settings.tolerance.kind == "ours")
    msg: dict[str, Any] = {"event": "sized", "sizes": sizes.to_dict(), "estimate": est.to_dict()}
    if settings.device == "cuda":
        free, total = torch.cuda.mem_get_info()
        msg.update(device_free=free, device_total=total)
    return msg, est, len(sets)


def _peak_rss_bytes() -> int:
    """This process's own peak resident memory: VmHWM (ru_maxrss keeps the parent's peak across fork+exec,
    so a child of a large parent would report the parent's size)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _serve(req: dict[str, Any], proto: IO[str]) -> dict[str, Any] | None:
    import torch

    from kernelagent.problem import load_problem
    from kernelagent.verifier.audit.probe import run_audit
    from kernelagent.verifier.audit.settings import AuditSettings

    settings = AuditSettings.from_dict(req["settings"])
    if settings.threads:
        torch.set_num_threads(settings.threads)
    problem = load_problem(req["problem"])
    sized, est, n_sets = _sized(problem, settings)
    _send(proto, sized)
    if sys.stdin.readline().strip() != "go":
        return None
    t0 = time.perf_counter()
    result = run_audit(problem, settings, n_sets)
    peak_dev = torch.cuda.max_memory_reserved() if settings.device == "cuda" else None
    result["memory"] = {"estimate": est.to_dict(), "sizes": sized["sizes"], "peak_device_bytes": peak_dev,
                        "peak_host_bytes": _peak_rss_bytes()}
    result.update(status="ok", seconds=round(time.perf_counter() - t0, 3), name=problem.spec.name,
                  sha256=problem.spec.sha256)
    return result


def main() -> None:
    _die_with_the_parent()
    oom_adj = _be_the_oom_victim()
    proto = _protocol_stream()
    from kernelagent.verifier.worker.guard import isolate_network

    isolate_network()
    req = json.loads(sys.stdin.readline())
    try:
        result = _serve(req, proto)
    except Exception as e:  # noqa: BLE001 - every failure is reported to the parent, which assigns blame
        result = _failure(e)
    if result is not None:
        result["oom_score_adj"] = OOM_SCORE_ADJ if oom_adj else None
        _send(proto, {"event": "result", **result})
    sys.stderr.flush()
    os._exit(0)


def _failure(e: Exception) -> dict[str, Any]:
    from kernelagent.problem import ProblemError
    from kernelagent.verifier.audit.errors import OutOfMemory

    if isinstance(e, ProblemError):
        return {"status": "error", "error": str(e)}
    if isinstance(e, OutOfMemory):
        return {"status": "oom", "error": str(e)}
    if isinstance(e, MemoryError):
        return {"status": "oom", "error": "out of host memory (MemoryError)"}
    return {"status": "internal", "error": f"{type(e).__name__}: {str(e)[:400]}",
            "traceback": traceback.format_exc()[-4000:]}


if __name__ == "__main__":
    main()
