"""Ray: connecting (or starting a local instance), and the task that verifies one problem on a node's GPU."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from kernelagent.tools.batch.options import BatchError, BatchOptions


def import_ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise BatchError("--ray needs Ray: pip install 'kernelagent[ray]'") from e
    return ray


def ray_init(ray: Any, opts: BatchOptions) -> bool:
    """Connect to (or start, for "local") a Ray instance; True when this call started it."""
    if ray.is_initialized():
        return False
    local = opts.ray == "local"
    try:
        ray.init(address=None if local else opts.ray, num_cpus=(opts.jobs or None) if local else None,
                 include_dashboard=False, log_to_driver=False, configure_logging=False)
    except (ConnectionError, ValueError, RuntimeError) as e:
        raise BatchError(f"could not reach Ray at {opts.ray!r}: {str(e)[:300]}") from e
    return True


def payload(problem: Path, candidates: list[Path]) -> dict[str, Any]:
    """What a Ray task needs, as text: nodes need not share this machine's files."""
    return {"problem_name": problem.name, "folder": problem.parent.name, "problem": problem.read_text(encoding="utf-8"),
            "candidates": {c.name: c.read_text(encoding="utf-8") for c in candidates}}


def ray_verify_problem(payload: dict[str, Any], options: dict[str, Any]) -> list[dict[str, Any]]:
    """One Ray task: verify a problem's candidates on this node's GPU (Ray sets CUDA_VISIBLE_DEVICES)."""
    from kernelagent.verifier.api import Verifier
    from kernelagent.verifier.options import VerifyOptions

    worker = f"ray:{os.uname().nodename}:{os.environ.get('CUDA_VISIBLE_DEVICES') or 'cpu'}"
    with tempfile.TemporaryDirectory(prefix="kernelagent-ray-") as tmp:
        folder = Path(tmp) / (payload["folder"] or "problem")
        folder.mkdir()
        problem = folder / payload["problem_name"]
        problem.write_text(payload["problem"], encoding="utf-8")
        out = []
        with Verifier(VerifyOptions(**options)) as v:
            for name, source in payload["candidates"].items():
                cand = Path(tmp) / f"candidate_{len(out)}_{name}"
                cand.write_text(source, encoding="utf-8")
                t0 = time.monotonic()
                report = v.verify(problem, cand).to_dict()
                out.append({"candidate": name, "source": source, "report": report, "worker": worker,
                            "seconds": time.monotonic() - t0})
    return out
