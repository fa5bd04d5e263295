"""`kernelagent report RUN|BATCH`: one self-contained HTML page with charts drawn as inline SVG.

    html = render(open_store(), "3f9a")   # a run or a batch, by id prefix
"""

from __future__ import annotations

from kernelagent.memory.store import Store
from kernelagent.report.data import ReportNotFoundError, batch_data, resolve, run_data
from kernelagent.report.page import batch_page, run_page


def render(store: Store, ident: str) -> tuple[str, str, str]:
    """(kind, full id, HTML) for the run or batch `ident` names (a unique id prefix is enough).

    Raises ReportNotFoundError, or AmbiguousIdError for a prefix of several ids.
    """
    kind, full = resolve(store, ident)
    html = run_page(run_data(store, full)) if kind == "run" else batch_page(batch_data(store, full))
    return kind, full, html


__all__ = ["ReportNotFoundError", "render"]
