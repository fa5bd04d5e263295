"""`audit_problem`: audit one problem file (the CLI's `audit FILE` and the agent's entry)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelagent.problem import ProblemError, inspect_problem
from kernelagent.verifier.audit.explain import advice, reasons
from kernelagent.verifier.audit.runner import Budget, audit_one
from kernelagent.verifier.audit.settings import AuditSettings, Tolerance, tolerance_from
from kernelagent.verifier.estimate import audit_peak, memory_refusal, read_machine, static_sizes
from kernelagent.verifier.options import VerifyOptions


def resolve_device(device: str) -> str:
    """auto -> cuda when a GPU is visible, else cpu; cuda without a GPU is the user's error."""
    import torch

    has_cuda = bool(torch.cuda.is_available())
    if device == "cuda" and not has_cuda:
        raise ValueError("--device cuda was asked for, but no CUDA GPU is visible")
    if device in ("cpu", "cuda"):
        return device
    return "cuda" if has_cuda else "cpu"


def settings_from(options: VerifyOptions | None, tolerance: Tolerance | str = "ours", **extra: Any) -> AuditSettings:
    """Audit settings from the verifier's options (device, seeds as input draws, timeout)."""
    options = options or VerifyOptions(timing=False)
    tol = tolerance if isinstance(tolerance, Tolerance) else tolerance_from(tolerance)
    return AuditSettings(device=resolve_device(options.device), draws=max(2, options.seeds), tolerance=tol,
                         timeout=max(options.timeout, 60.0), **extra)


def audit_problem(path: str | Path, options: VerifyOptions | None = None, *, tolerance: Tolerance | str = "ours",
                  settings: AuditSettings | None = None, budget: Budget | None = None) -> dict[str, Any]:
    """Audit one problem: a result dict with `status` (ok | error | refused | oom | timeout | crashed |
    internal), `degenerate` (the main inputs are), the trivial answers that pass, the variations, notes."""
    settings = settings or settings_from(options, tolerance)
    path = Path(path)
    try:
        spec = inspect_problem(path)
    except ProblemError as e:
        return finish({"problem": str(path), "status": "error", "error": str(e)})
    early = _static_refusal(spec.source, settings)
    if early:
        return finish({"problem": str(path), "name": spec.name, "sha256": spec.sha256, "status": "refused",
                       "error": early})
    result = audit_one(path, settings, budget or Budget())
    result.setdefault("name", spec.name)
    result.setdefault("sha256", spec.sha256)
    return finish(result)


def _static_refusal(source: str, settings: AuditSettings) -> str | None:
    """Turn away, before any process starts, a problem whose inputs alone do not fit (sized from the source)."""
    sizes = static_sizes(source)
    if sizes is None:
        return None
    est = audit_peak(sizes, settings.device, float64=settings.tolerance.kind == "ours")
    return memory_refusal(est, read_machine(settings.device), "auditing this problem", sizes)


def finish(result: dict[str, Any]) -> dict[str, Any]:
    """Fill the keys every result has (a failed audit is not degenerate), the reasons and the advice."""
    result.setdefault("degenerate", False)
    result.setdefault("trivial_answers_that_pass", [])
    result["reasons"] = reasons(result) if result.get("status") == "ok" else []
    result["advice"] = advice(result)
    return result
