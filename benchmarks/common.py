"""Shared helpers for the GPU benchmark scripts: environment facts and result files."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata as md
import json
import os
from pathlib import Path
from typing import Any

METHOD = ("median of CUDA-event timings (kernelagent.verifier.measure.timing.measure: warm-up, L2 flushed by a 256 MiB "
          "write before every sample, inputs rotated among 3 sets, CUDA-graph replay under 10 us)")


def environment() -> dict[str, Any]:
    import torch

    def ver(d: str) -> str | None:
        try:
            return md.version(d)
        except md.PackageNotFoundError:
            return None

    return {"date": _dt.date.today().isoformat(), "gpu": torch.cuda.get_device_name() if torch.cuda.is_available()
            else None, "torch": torch.__version__, "triton": ver("triton"), "cutlass_dsl": ver("nvidia-cutlass-dsl"),
            "liger_kernel": ver("liger-kernel"), "quack": ver("quack-kernels"), "cuda": torch.version.cuda}


# A card's generated block in card.md; what stands before and after it is the card's own text.
BEGIN, END = "<!-- measured:begin -->", "<!-- measured:end -->"


def write_measured(folder: Path, rows: list[dict[str, Any]], block: str) -> None:
    """A card's measured figures: `rows` as card.json's `measured`, `block` (BEGIN ... END) in card.md in place of
    the old block (appended where there is none), the text around it kept as it stands."""
    card = json.loads((folder / "card.json").read_text())
    card["measured"] = rows
    (folder / "card.json").write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n")
    text = (folder / "card.md").read_text()
    head, tail = (text[:text.index(BEGIN)], text[text.index(END) + len(END):]) if BEGIN in text else (text, "")
    (folder / "card.md").write_text(head.rstrip() + "\n\n" + block + (tail if tail.strip() else "\n"))


def out_dir() -> Path:
    d = Path(os.environ.get("OUT") or Path(__file__).parent / "results")
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_result(name: str, data: dict[str, Any]) -> Path:
    path = out_dir() / f"{name}.json"
    payload = {"benchmark": name, "environment": environment(), **data}
    path.write_text(json.dumps(payload, indent=2, default=str))
    return path


def load_module(path: Any, name: str) -> Any:
    """A Python file imported as module `name` (registered in sys.modules): an older copy of a kernel file, say, to
    time beside the current one in one process."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a Python file that can be imported")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


def median_ms(call: Any) -> float:
    """The probes' timing: one call first (compiles), then triton.testing.do_bench's median (warmup 25 ms, rep
    100 ms, L2 flushed before every call)."""
    import torch
    import triton

    call()
    torch.cuda.synchronize()
    return float(triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median"))
