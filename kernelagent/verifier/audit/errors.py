"""Whose fault a failure is, inside the audit child: the problem's own code, or memory."""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import torch

from kernelagent.problem import ProblemError


class OutOfMemory(Exception):
    """An allocation failed (host or device): the problem is too large for what is free."""


def problem_code(what: str, fn: Any, path: str) -> Any:
    """Run the problem's own code; its failures become a ProblemError naming the line, memory failures an
    OutOfMemory."""
    try:
        return fn()
    except ProblemError:
        raise
    except torch.OutOfMemoryError as e:
        raise OutOfMemory(f"out of GPU memory during {what}: {str(e).splitlines()[0][:300]}") from e
    except Exception as e:  # noqa: BLE001 - whatever the problem's code raises is the problem's fault
        if isinstance(e, RuntimeError) and "allocate" in str(e) and "memory" in str(e):
            raise OutOfMemory(f"out of host memory during {what}: {str(e).splitlines()[0][:300]}") from e
        frames = [f for f in traceback.extract_tb(e.__traceback__) if Path(f.filename) == Path(path).resolve()
                  or f.filename == path]
        where = f", line {frames[-1].lineno} (`{(frames[-1].line or '').strip()}`)" if frames else ""
        detail = " ".join(str(e).split())[:400]
        raise ProblemError(f"problem file {path}{where}: {what} raised {type(e).__name__}: {detail}",
                           path=path, line=frames[-1].lineno if frames else None) from e
