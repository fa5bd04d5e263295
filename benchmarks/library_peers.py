"""Library kernels against their peers on the H200, in one run with one timing method.

For softmax, RMSNorm and cross-entropy (bf16, the shapes of shared/notes/GPU.md), forward and
forward+backward: kernelagent's Triton kernels, PyTorch eager, torch.compile, Liger-Kernel and QuACK
(each peer skipped with the reason when it does not import or run). Correctness of ours is checked
against eager before timing. Writes benchmarks/results/<date>-h200/library_peers.json (or $OUT).
Run: `source .carry/setup.sh && python3 benchmarks/library_peers.py`.
"""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812

from benchmarks.common import METHOD, write_result
from kernelagent.verifier.measure.ceilings import load_ceilings
from kernelagent.verifier.measure.timing import measure

DT = torch.bfloat16


def _lib(name: str) -> Any:
    return importlib.import_module(f"kernelagent.kernels.{name}.triton")


def _peer(module: str, attr: str) -> Callable | None:
    try:
        return getattr(importlib.import_module(module), attr)
    except Exception:  # noqa: BLE001 - a missing or broken peer is reported, not fatal
        return None


def cases() -> dict[str, dict[str, Any]]:
    """Per op: input factory, and the implementations as callables of the inputs."""
    sm = {"make": lambda: [torch.randn(32768, 8192, device="cuda", dtype=DT)],
          "ours": lambda x: _lib("softmax").softmax(x), "eager": lambda x: torch.softmax(x, -1),
          "liger": _peer("liger_kernel.transformers.functional", "liger_softmax"),
          "quack": _peer("quack.softmax", "softmax"), "bytes": 2 * 32768 * 8192 * 2}
    w = torch.randn(8192, device="cuda", dtype=DT)
    liger_rms = _peer("liger_kernel.transformers.functional", "liger_rms_norm")
    quack_rms = _peer("quack.rmsnorm", "rmsnorm")
    rms = {"make": lambda: [torch.randn(32768, 8192, device="cuda", dtype=DT)],
           "ours": lambda x: _lib("rms_norm").rms_norm(x, w, 1e-6),
           "eager": lambda x: F.rms_norm(x, (8192,), w, 1e-6),
           "liger": (lambda x: liger_rms(x, w, 1e-6, in_place=False)) if liger_rms else None,
           "quack": (lambda x: quack_rms(x, w, eps=1e-6)) if quack_rms else None, "bytes": 2 * 32768 * 8192 * 2}
    liger_ce = _peer("liger_kernel.transformers.functional", "liger_cross_entropy")
    quack_ce = _peer("quack.cross_entropy", "cross_entropy")
    ce = {"make": lambda: [torch.randn(8192, 128256, device="cuda", dtype=DT),
                           torch.randint(0, 128256, (8192,), device="cuda")],
          "ours": lambda x, t: _lib("cross_entropy").cross_entropy(x, t), "eager": lambda x, t: F.cross_entropy(x, t),
          "liger": liger_ce, "quack": quack_ce, "bytes": 8192 * 128256 * 2}
    return {"softmax": sm, "rms_norm": rms, "cross_entropy": ce}


def _timed(fn: Callable, sets: list[list[Any]], backward: bool) -> dict[str, Any]:
    def call(inputs: list[Any]) -> Callable[[], None]:
        if not backward:
            return lambda: fn(*inputs)
        x = inputs[0].detach().requires_grad_(True)
        rest = inputs[1:]

        def fwd_bwd() -> None:
            out = fn(x, *rest)
            out.backward(torch.ones_like(out))
            x.grad = None
        return fwd_bwd
    return measure([call(s) for s in sets]).to_dict(keep_samples=False)


def main() -> dict[str, Any]:
    rows = []
    ceil = load_ceilings(torch.cuda.get_device_name())
    copy_tbps = (ceil.get("copy_gbps") or 0) / 1e3
    for op, c in cases().items():
        sets = [c["make"]() for _ in range(3)]
        ours = c["ours"](*sets[0]).float()
        ref = c["eager"](*sets[0]).float()
        err = float((ours - ref).norm() / ref.norm())
        impls = {"kernelagent": c["ours"], "eager": c["eager"], "torch.compile": torch.compile(c["eager"]),
                 "liger": c["liger"], "quack": c["quack"]}
        for mode in ("forward", "forward+backward"):
            for name, fn in impls.items():
                row = {"op": op, "mode": mode, "impl": name}
                if fn is None:
                    row["error"] = "not importable here"
                else:
                    try:
                        t = _timed(fn, sets, mode != "forward")
                        row.update(median_ms=t["median_ms"], iqr_ms=t["q3_ms"] - t["q1_ms"], method=t["method"])
                        if mode == "forward":
                            row["tb_per_s"] = c["bytes"] / (t["median_ms"] * 1e-3) / 1e12
                            if copy_tbps:
                                row["pct_of_copy_bw"] = 100 * row["tb_per_s"] / copy_tbps
                    except Exception as e:  # noqa: BLE001
                        row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
                        traceback.print_exc()
                rows.append(row)
                print(row, flush=True)
        rows.append({"op": op, "check": "kernelagent vs eager rel L2", "value": err})
        write_result("library_peers", _result(rows, ceil))  # after each op: a cut-off run keeps what it measured
    return _result(rows, ceil)


def _result(rows: list[dict[str, Any]], ceil: dict[str, Any]) -> dict[str, Any]:
    result = {"method": METHOD, "ceilings": ceil, "rows": rows,
              "peers": ["torch eager", "torch.compile", "Liger-Kernel", "QuACK"],
              "bytes_note": "tb_per_s counts the minimum bytes of the forward (inputs read + output written once)"}
    return result


if __name__ == "__main__":
    main()
