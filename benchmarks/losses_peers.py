"""The fused-loss set against its peers on the H200, in one run with one timing method (issue 19).

Cross-entropy, bf16 logits [8192, 128256], mean: forward and forward+backward for kernelagent's
Triton kernels (gradient into new memory, and into the logits with inplace_backward), its CuTe DSL
kernels, PyTorch eager, torch.compile, Liger-Kernel and QuACK. Linear cross-entropy, bf16, M = H =
4096, V = 128256: forward+backward (gradients of hidden and weight) for ours with cuBLAS and with
Triton GEMMs, eager, torch.compile, Liger and QuACK, each with its peak memory beyond inputs and
gradients. Then small sweeps of our launch configurations. Every peer is skipped with the reason
when it does not import or run; ours are checked against eager before timing.
Writes losses_peers.json to $OUT (else benchmarks/results/), after every section, so a run cut off
by its time limit keeps what it measured. LOSSES_ONLY=ce_section,lce_section picks sections.
Run: `source .carry/setup.sh && PYTHONPATH=$PWD python3 benchmarks/losses_peers.py` (about 2 minutes).
Then, without a GPU: `python benchmarks/losses_peers.py --cards benchmarks/results/<date>-h200/losses_peers.json`
copies the figures into the two cards (card.json `measured`, card.md's generated block).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812

from benchmarks.common import BEGIN, END, METHOD, write_measured, write_result
from kernelagent.verifier.measure.timing import measure

DT = torch.bfloat16
CE_SHAPE = (8192, 128256)
LCE_SHAPE = (4096, 4096, 128256)  # M, H, V
GIB = 1 << 30
TARGETS = {"ce_forward_ms": 0.52, "ce_forward_backward_ms": 1.10, "lce_forward_backward_ms": 17.0,
           "lce_peak_extra_gib": 1.5}
QUICK = os.environ.get("LOSSES_QUICK") == "1"  # fewer repetitions (smoke runs)
ROOT = Path(__file__).resolve().parents[1]


def _module(name: str) -> Any | None:
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - a missing or broken peer is reported, not fatal
        return None


def _peer(module: str, attr: str) -> Callable | None:
    mod = _module(module)
    return getattr(mod, attr, None) if mod is not None else None


def _time(fn: Callable, sets: list[list[Any]], backward: bool, grad_of: tuple[int, ...] = (0,),
          min_reps: int = 30) -> dict[str, Any]:
    """Median time of fn over rotated input sets; with backward, d(out)/d(inputs in grad_of) too (on
    copies: Liger and our inplace_backward overwrite the logits with their gradient)."""
    def call(inputs: list[Any]) -> Callable[[], None]:
        if not backward:
            return lambda: fn(*inputs)
        leaves = [x.detach().clone().requires_grad_(True) if i in grad_of else x for i, x in enumerate(inputs)]

        def fwd_bwd() -> None:
            out = fn(*leaves)
            out.backward(torch.ones_like(out) if out.dim() else None)
            for i in grad_of:
                leaves[i].grad = None
        return fwd_bwd
    rep = 60.0 if QUICK else 200.0
    t = measure([call(s) for s in sets], rep_ms=rep, min_reps=min(min_reps, 10) if QUICK else min_reps)
    t = t.to_dict(keep_samples=False)
    return {"median_ms": t["median_ms"], "iqr_ms": t["q3_ms"] - t["q1_ms"], "method": t["method"]}


def _row(rows: list[dict], base: dict[str, Any], fn: Callable | None, timer: Callable[[], dict]) -> None:
    row = dict(base)
    if fn is None:
        row["error"] = "not importable here"
    else:
        try:
            row.update(timer())
        except Exception as e:  # noqa: BLE001 - one failing implementation must not end the run
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            traceback.print_exc()
    rows.append(row)
    print(row, flush=True)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30))


# ------------------------------------------------------------------------------ cross-entropy


def ce_impls() -> dict[str, Callable | None]:
    tri = _module("kernelagent.kernels.cross_entropy.triton")
    cute = _module("kernelagent.kernels.cross_entropy.cute")
    liger = _peer("liger_kernel.transformers.functional", "liger_cross_entropy")
    quack = _peer("quack.cross_entropy", "cross_entropy")
    return {
        "kernelagent-triton": tri.cross_entropy if tri else None,
        "kernelagent-triton-inplace": (lambda x, t: tri.cross_entropy(x, t, inplace_backward=True)) if tri else None,
        "kernelagent-cute": cute.cross_entropy if cute else None,
        "eager": F.cross_entropy,
        "torch.compile": torch.compile(F.cross_entropy),
        "liger": liger,
        "quack": quack,
    }


def ce_section(rows: list[dict]) -> None:
    n, v = CE_SHAPE
    sets = [[torch.randn(n, v, device="cuda", dtype=DT), torch.randint(0, v, (n,), device="cuda")] for _ in range(3)]
    impls = ce_impls()
    ref_x = sets[0][0].detach().requires_grad_(True)
    ref = F.cross_entropy(ref_x, sets[0][1])
    ref.backward()
    for name in ("kernelagent-triton", "kernelagent-cute"):
        fn = impls[name]
        if fn is None:
            continue
        try:
            x = sets[0][0].detach().clone().requires_grad_(True)
            out = fn(x, sets[0][1])
            out.backward()
            rows.append({"op": "cross_entropy", "check": f"{name} vs eager", "loss_rel": _rel(out, ref),
                         "grad_rel": _rel(x.grad, ref_x.grad)})
        except Exception as e:  # noqa: BLE001
            rows.append({"op": "cross_entropy", "check": f"{name} vs eager", "error": f"{type(e).__name__}: {e}"})
        print(rows[-1], flush=True)
    bytes_fwd = n * v * 2
    for mode in ("forward", "forward+backward"):
        for name, fn in impls.items():
            if name == "kernelagent-triton-inplace" and mode == "forward":
                continue  # without a gradient it is the plain forward
            base = {"op": "cross_entropy", "shape": list(CE_SHAPE), "dtype": "bfloat16", "mode": mode, "impl": name}
            _row(rows, base, fn, lambda fn=fn, mode=mode: _with_bw(_time(fn, sets, mode != "forward"), bytes_fwd,
                                                                   mode))


def _with_bw(t: dict[str, Any], bytes_fwd: int, mode: str) -> dict[str, Any]:
    moved = bytes_fwd * (1 if mode == "forward" else 2)  # one read; one read and one write
    t["tb_per_s_min_bytes"] = moved / (t["median_ms"] * 1e-3) / 1e12
    return t


def ce_sweep(rows: list[dict]) -> None:
    """Our Triton row kernels' (BLOCK, warps, programs per SM; 0 = one program per row) for the fused
    forward (gradient written in the same pass), the one the forward+backward target depends on, and for
    the forward alone; each fused configuration checked against eager (the gradient's relative L2 error)
    before it is timed."""
    tri = _module("kernelagent.kernels.cross_entropy.triton")
    if tri is None:
        return
    n, v = CE_SHAPE
    sets = [[torch.randn(n, v, device="cuda", dtype=DT), torch.randint(0, v, (n,), device="cuda")] for _ in range(2)]
    ref_x = sets[0][0].detach().float().requires_grad_(True)
    F.cross_entropy(ref_x, sets[0][1]).backward()
    saved = dict(tri.CONFIGS)
    grids = {"fused": [(16384, 32, 1), (8192, 32, 1), (16384, 16, 0), (8192, 16, 0), (16384, 8, 0)],
             "fwd": [(16384, 8, 0), (8192, 8, 0), (16384, 16, 0), (32768, 16, 0)]}
    try:
        for kind, backward in (("fused", True), ("fwd", False)):
            for config in grids[kind][: 2 if QUICK else None]:
                tri.CONFIGS[kind] = config
                base = {"op": "cross_entropy", "sweep": kind, "config": list(config),
                        "mode": "forward+backward" if backward else "forward"}
                if backward:
                    x = sets[0][0].detach().clone().requires_grad_(True)
                    tri.cross_entropy(x, sets[0][1]).backward()
                    base["grad_rel"] = _rel(x.grad, ref_x.grad)
                _row(rows, base, tri.cross_entropy, lambda b=backward: _time(tri.cross_entropy, sets, b))
            tri.CONFIGS[kind] = saved[kind]
    finally:
        tri.CONFIGS.update(saved)


# ----------------------------------------------------------------------- linear cross-entropy


def lce_impls() -> dict[str, Callable | None]:
    _module("kernelagent.kernels.linear_cross_entropy.cublas")  # registers gemm="cublas"
    lce = _module("kernelagent.kernels.linear_cross_entropy.triton")
    lce_cute = _module("kernelagent.kernels.linear_cross_entropy.cute")
    liger = _peer("liger_kernel.transformers.functional", "liger_fused_linear_cross_entropy")
    # QuACK's chunked version (its logits one chunk at a time); the plain one materialises them all
    quack = _peer("quack.linear_cross_entropy", "chunked_linear_cross_entropy")

    def eager(h, w, t):
        return F.cross_entropy(F.linear(h, w), t)
    return {
        "kernelagent-cublas": (lambda h, w, t: lce.linear_cross_entropy(h, w, t, gemm="cublas")) if lce else None,
        "kernelagent-triton": (lambda h, w, t: lce.linear_cross_entropy(h, w, t, gemm="triton")) if lce else None,
        "kernelagent-cute": lce_cute.linear_cross_entropy if lce_cute else None,
        "kernelagent-cublas-1gib-chunks": (lambda h, w, t: lce.linear_cross_entropy(
            h, w, t, gemm="cublas", chunk_bytes=1 << 30)) if lce else None,
        "eager": eager,
        "torch.compile": torch.compile(eager),
        "liger": (lambda h, w, t: liger(h, w, t)) if liger else None,
        "quack": (lambda h, w, t: quack(h, w, t, chunk_size=2048)) if quack else None,
    }


def _peak_extra(fn: Callable, h: torch.Tensor, w: torch.Tensor, t: torch.Tensor) -> dict[str, float]:
    """Peak memory of one forward+backward beyond the inputs and the gradients it leaves (GiB)."""
    hx, wx = h.detach().clone().requires_grad_(True), w.detach().clone().requires_grad_(True)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn(hx, wx, t).backward()
    torch.cuda.synchronize()
    grads = hx.grad.numel() * hx.grad.element_size() + wx.grad.numel() * wx.grad.element_size()
    return {"peak_extra_gib": (torch.cuda.max_memory_allocated() - before - grads) / GIB}


def lce_section(rows: list[dict]) -> None:
    m, h, v = LCE_SHAPE
    sets = [[torch.randn(m, h, device="cuda", dtype=DT), torch.randn(v, h, device="cuda", dtype=DT) / h**0.5,
             torch.randint(0, v, (m,), device="cuda")] for _ in range(2)]
    impls = lce_impls()
    hx, wx = sets[0][0].detach().requires_grad_(True), sets[0][1].detach().requires_grad_(True)
    ref = impls["eager"](hx, wx, sets[0][2])
    ref.backward()
    for name in ("kernelagent-cublas", "kernelagent-triton", "kernelagent-cute"):
        fn = impls[name]
        if fn is None:
            continue
        try:
            a, b = sets[0][0].detach().requires_grad_(True), sets[0][1].detach().requires_grad_(True)
            out = fn(a, b, sets[0][2])
            out.backward()
            rows.append({"op": "linear_cross_entropy", "check": f"{name} vs eager", "loss_rel": _rel(out, ref),
                         "dhidden_rel": _rel(a.grad, hx.grad), "dweight_rel": _rel(b.grad, wx.grad)})
        except Exception as e:  # noqa: BLE001
            rows.append({"op": "linear_cross_entropy", "check": f"{name} vs eager",
                         "error": f"{type(e).__name__}: {e}"})
        print(rows[-1], flush=True)
    del hx, wx, ref
    flops = 6 * m * h * v
    for name, fn in impls.items():
        base = {"op": "linear_cross_entropy", "shape": list(LCE_SHAPE), "dtype": "bfloat16",
                "mode": "forward+backward", "impl": name}

        def timer(fn=fn) -> dict[str, Any]:
            t = _time(fn, sets, True, grad_of=(0, 1), min_reps=10)  # 20-90 ms a call: GEMM-bound, steady
            t["tflop_per_s"] = flops / (t["median_ms"] * 1e-3) / 1e12
            t.update(_peak_extra(fn, *sets[0]))
            return t
        _row(rows, base, fn, timer)


def gemm_sweep(rows: list[dict]) -> None:
    """Our Triton GEMM's (BM, BN, BK, GROUP_M, warps, stages) on the linear cross-entropy."""
    lce = _module("kernelagent.kernels.linear_cross_entropy.triton")
    if lce is None:
        return
    m, h, v = LCE_SHAPE
    sets = [[torch.randn(m, h, device="cuda", dtype=DT), torch.randn(v, h, device="cuda", dtype=DT) / h**0.5,
             torch.randint(0, v, (m,), device="cuda")]]
    saved = lce.GEMM_CONFIGS[(2, True)]
    grid = [(128, 256, 64, 8, 8, 3), (128, 128, 64, 8, 4, 4), (128, 256, 64, 8, 8, 4), (256, 128, 64, 8, 8, 3),
            (128, 256, 64, 16, 8, 3), (128, 128, 128, 8, 8, 3)]
    fn = lambda a, b, c: lce.linear_cross_entropy(a, b, c, gemm="triton")  # noqa: E731
    try:
        for config in grid[: 2 if QUICK else None]:
            lce.GEMM_CONFIGS[(2, True)] = config
            base = {"op": "linear_cross_entropy", "sweep": "gemm", "config": list(config), "mode": "forward+backward"}
            _row(rows, base, fn, lambda: _time(fn, sets, True, grad_of=(0, 1), min_reps=10))
    finally:
        lce.GEMM_CONFIGS[(2, True)] = saved


def chunk_sweep(rows: list[dict]) -> None:
    """The linear cross-entropy's chunk size (logits bytes a chunk) for the cuBLAS and CuTe DSL GEMMs, with
    the peak memory beyond inputs and gradients: fewer chunks give dweight's product a longer k loop."""
    _module("kernelagent.kernels.linear_cross_entropy.cublas")
    lce = _module("kernelagent.kernels.linear_cross_entropy.triton")
    lce_cute = _module("kernelagent.kernels.linear_cross_entropy.cute")
    m, h, v = LCE_SHAPE
    sets = [[torch.randn(m, h, device="cuda", dtype=DT), torch.randn(v, h, device="cuda", dtype=DT) / h**0.5,
             torch.randint(0, v, (m,), device="cuda")]]
    for mib in (256, 512, 1024):
        impls = {"kernelagent-cute": lce_cute and (lambda a, b, c, n=mib: lce_cute.linear_cross_entropy(
                     a, b, c, chunk_bytes=n << 20)),
                 "kernelagent-cublas": lce and (lambda a, b, c, n=mib: lce.linear_cross_entropy(
                     a, b, c, gemm="cublas", chunk_bytes=n << 20))}
        for name, fn in impls.items():
            if not fn:
                continue
            base = {"op": "linear_cross_entropy", "sweep": "chunk", "chunk_mib": mib, "impl": name,
                    "mode": "forward+backward"}
            _row(rows, base, fn, lambda fn=fn: {**_time(fn, sets, True, grad_of=(0, 1), min_reps=10),
                                                **_peak_extra(fn, *sets[0])})


# ---------------------------------------------------------------------------------------- run


def _result(rows: list[dict], t0: float) -> dict[str, Any]:
    return {"method": METHOD, "rows": rows, "targets": TARGETS, "seconds": round(time.time() - t0, 1),
            "peers": ["torch eager", "torch.compile", "Liger-Kernel", "QuACK"],
            "notes": "tb_per_s_min_bytes: the logits read once (forward) or read and written once (forward+backward);"
                     " peak_extra_gib: max_memory_allocated during one forward+backward minus memory before it and"
                     " minus the gradients it leaves"}


def run() -> dict[str, Any]:
    t0 = time.time()
    rows: list[dict] = []
    sections = [ce_section, lce_section, ce_sweep, gemm_sweep, chunk_sweep]
    only = os.environ.get("LOSSES_ONLY")  # e.g. "ce_section,lce_section"
    for section in sections:
        if only and section.__name__ not in only.split(","):
            continue
        try:
            section(rows)
        except Exception as e:  # noqa: BLE001 - keep what the other sections measured
            rows.append({"section": section.__name__, "error": f"{type(e).__name__}: {str(e)[:300]}"})
            traceback.print_exc()
        torch.cuda.empty_cache()
        write_result("losses_peers", _result(rows, t0))  # a cut-off run keeps what it measured
    return _result(rows, t0)


# --------------------------------------------------------------------------------------------- cards

# impl name in the results -> (backend, variant) on the card
OURS = {"cross_entropy": {"kernelagent-triton": ("triton", ""),
                          "kernelagent-triton-inplace": ("triton", "inplace_backward"),
                          "kernelagent-cute": ("cute", "")},
        "linear_cross_entropy": {"kernelagent-cublas": ("triton", "cuBLAS GEMMs"),
                                 "kernelagent-triton": ("triton", "Triton GEMMs"),
                                 "kernelagent-cute": ("cute", ""),
                                 "kernelagent-cublas-1gib-chunks": ("triton", "cuBLAS GEMMs, one 1 GiB chunk")}}
SHAPE_TEXT = {"cross_entropy": "logits [8192, 128256] bf16, int64 targets, mean",
              "linear_cross_entropy": "hidden [4096, 4096], weight [128256, 4096] bf16, mean"}


def _misses(family: str, mode: str, ours: dict[str, Any]) -> list[str]:
    if family == "cross_entropy":
        key = "ce_forward_ms" if mode == "forward" else "ce_forward_backward_ms"
        return [f"{TARGETS[key]} ms target by {ours['median_ms'] - TARGETS[key]:.3f} ms"] \
            if ours["median_ms"] > TARGETS[key] else []
    out = []
    if ours["median_ms"] > TARGETS["lce_forward_backward_ms"]:
        out.append(f"{TARGETS['lce_forward_backward_ms']} ms target by "
                   f"{ours['median_ms'] - TARGETS['lce_forward_backward_ms']:.2f} ms")
    if ours.get("peak_extra_gib", 0.0) > TARGETS["lce_peak_extra_gib"]:
        out.append(f"{TARGETS['lce_peak_extra_gib']} GiB memory target: {ours['peak_extra_gib']:.2f} GiB")
    return out


def card_rows(data: dict[str, Any], family: str, source: str) -> list[dict[str, Any]]:
    """The card's `measured` rows for `family` from a losses_peers results file: each mode and each of
    our implementations, with every peer's median (and peak memory) from the same run and the targets missed."""
    env, out = data["environment"], []
    for mode in ("forward", "forward+backward"):
        got = {r["impl"]: r for r in data["rows"] if r.get("op") == family and r.get("mode") == mode
               and "impl" in r and "median_ms" in r}
        for impl, (backend, variant) in OURS.get(family, {}).items():
            ours = got.get(impl)
            if ours is None:
                continue
            row = {"date": env["date"], "gpu": env["gpu"], "torch": env["torch"], "triton": env["triton"],
                   "cutlass_dsl": env.get("cutlass_dsl"), "backend": backend, "variant": variant,
                   "shape": SHAPE_TEXT[family], "mode": mode, "median_ms": round(ours["median_ms"], 4),
                   "peers_ms": {k: round(v["median_ms"], 4) for k, v in got.items() if not k.startswith("kernelagent")},
                   "method": data["method"], "source": source}
            if "peak_extra_gib" in ours:
                row["peak_extra_gib"] = round(ours["peak_extra_gib"], 3)
                row["peers_peak_extra_gib"] = {k: round(v["peak_extra_gib"], 3) for k, v in got.items()
                                               if not k.startswith("kernelagent") and "peak_extra_gib" in v}
            if _misses(family, mode, ours):
                row["misses"] = "; ".join(_misses(family, mode, ours))
            out.append(row)
    return out


def card_markdown(rows: list[dict[str, Any]]) -> str:
    lines = [BEGIN, "## Measured", ""]
    for r in rows:
        peers = " · ".join(f"{k} {v:.3f} ms" for k, v in r["peers_ms"].items())
        mem = f", {r['peak_extra_gib']:.2f} GiB beyond inputs and gradients" if "peak_extra_gib" in r else ""
        miss = f" (misses the {r['misses']})" if "misses" in r else ""
        variant = f" ({r['variant']})" if r["variant"] else ""
        lines.append(f"- {r['backend']}{variant}, {r['mode']}, {r['shape']}: **{r['median_ms']:.3f} ms**{mem}{miss}; "
                     f"same run: {peers}")
    r0 = rows[0]
    lines += ["", f"{r0['gpu']}, {r0['date']}, torch {r0['torch']}, triton {r0['triton']}, nvidia-cutlass-dsl "
              f"{r0['cutlass_dsl']}; {r0['method']}. Source: `{r0['source']}` (written by "
              "`benchmarks/losses_peers.py`).", END]
    return "\n".join(lines)


def update_cards(path: Path) -> list[str]:
    """Copy the figures of a results file into the two loss cards (card.json `measured`, card.md block)."""
    data = json.loads(path.read_text())
    source = str(path.resolve().relative_to(ROOT))
    done = []
    for family in OURS:
        rows = card_rows(data, family, source)
        if not rows:
            continue
        write_measured(ROOT / "kernelagent" / "kernels" / family, rows, card_markdown(rows))
        done.append(family)
    return done


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cards", type=Path, help="copy a results file's figures into the cards (no GPU needed)")
    args = p.parse_args(argv)
    if args.cards:
        print(update_cards(args.cards))
    else:
        run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
