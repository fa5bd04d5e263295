"""Problem audit: is a problem degenerate for its inputs, so that a kernel could pass without computing?

A kernel that returns zeros, a constant, an input, a parameter or a memorised output must not pass. The
audit says which of those would pass under a tolerance (ours, KernelBench's, or explicit), and how much
the output moves with new inputs, with new parameters, and with both. A problem is degenerate when its
main inputs (get_inputs) are; a degenerate get_test_inputs set is a note.

Layout: `problem` (one file) and `folder` (many, in parallel, resumable) on the parent side; `runner`
starts one `child` per problem, which sizes it (`sizing`, estimates in verifier.estimate), then runs
`probe` (`answers`, `compare`); `explain` words the verdict. `pack` audits a verifier's reference pack for
the agent. The names below are imported on first use, so a child or a worker importing one submodule does
not pull in the rest.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "audit_problem": "problem", "audit_pack": "pack", "advice": "explain", "audit_folder": "folder",
    "AuditSettings": "settings", "Tolerance": "settings", "TOLERANCES": "settings", "tolerance_from": "settings",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
