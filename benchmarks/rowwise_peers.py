"""The row-wise library kernels (softmax, log_softmax, rms_norm, rms_norm_add, layer_norm) against their
peers on the H200, in one run with one timing method.

Implementations: kernelagent Triton and CuTe DSL (through kernelagent's registered ops), PyTorch eager,
torch.compile, Liger-Kernel and QuACK (each peer skipped with the reason when it does not import or run).
Modes: forward, backward alone (the forward outside the timed region) and forward+backward. Cases: every op
on [32768, 8192] bf16, then a sweep of row lengths 1K..256K at a fixed 2**27 elements (256 MiB of bf16
input). Every implementation's forward is checked against eager first. Effective TB/s counts the minimum
bytes (each input read once, each output written once). The run stops starting new work after --budget
seconds and writes what it has: JSON after each op, then a PNG of TB/s against row length, drawn by a small
built-in PNG writer (matplotlib is not on the H200).

Run (H200):  source .carry/setup.sh && python3 benchmarks/rowwise_peers.py            -> $OUT/rowwise_peers.{json,png}
             python3 benchmarks/rowwise_peers.py --tune       measures launch-table alternatives, prints the best
                 (--only rms_norm,layer_norm --widths 1024,16384,65536 --tune-mode backward: a part of them)
Run (here):  python3 benchmarks/rowwise_peers.py --plot RESULTS.json   redraws the PNG
             python3 benchmarks/rowwise_peers.py --cards RESULTS.json  copies the figures into the cards
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import struct
import sys
import time
import traceback
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import BEGIN, END, write_measured  # noqa: E402

OPS = ("softmax", "log_softmax", "rms_norm", "rms_norm_add", "layer_norm")
FAMILY = {"softmax": "softmax", "log_softmax": "log_softmax", "rms_norm": "rms_norm", "rms_norm_add": "rms_norm",
          "layer_norm": "layer_norm"}
MAIN_SHAPE = (32768, 8192)
SWEEP_ELEMENTS = 2**27
SWEEP_N = (1024, 4096, 16384, 65536, 262144)
SWEEP_N_FULL = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)
SWEEP_OPS = ("softmax", "rms_norm", "layer_norm")
MODES = ("forward", "backward", "forward+backward")
# Minimum traffic in units of one [M, N] tensor: (forward, backward) = (inputs read + outputs written).
# softmax-like: x -> y; y, dy -> dx. rms_norm_add: x, r -> y, s; s, dy, ds -> dx (dresidual is dx itself).
UNITS = {"softmax": (2, 3), "log_softmax": (2, 3), "rms_norm": (2, 3), "rms_norm_add": (4, 4), "layer_norm": (2, 3)}
TARGETS = {"forward": 4.1, "backward": 3.8}  # TB/s on [32768, 8192] bf16 (issue 18)
SHAPE_TEXT = {"softmax": "x [32768, 8192] bf16", "log_softmax": "x [32768, 8192] bf16",
              "rms_norm": "x [32768, 8192] bf16, weight [8192]",
              "layer_norm": "x [32768, 8192] bf16, weight, bias [8192]",
              "rms_norm_add": "x, residual [32768, 8192] bf16, weight [8192]"}


# ------------------------------------------------------------------------------------- implementations


def _peer(module: str, attr: str) -> Callable | None:
    try:
        return getattr(importlib.import_module(module), attr)
    except Exception:  # noqa: BLE001 - a missing or broken peer is reported, not fatal
        return None


def _ours(backend: str) -> dict[str, Callable] | None:
    try:
        mods = {f: importlib.import_module(f"kernelagent.kernels.{f}.{backend}") for f in set(FAMILY.values())}
    except Exception:  # noqa: BLE001 - the cute backend needs the carry's nvidia-cutlass-dsl
        traceback.print_exc()
        return None
    return {"softmax": mods["softmax"].softmax, "log_softmax": mods["log_softmax"].log_softmax,
            "rms_norm": lambda x, w: mods["rms_norm"].rms_norm(x, w, 1e-6),
            "rms_norm_add": lambda x, r, w: mods["rms_norm"].rms_norm_add(x, r, w, 1e-6),
            "layer_norm": lambda x, w, b: mods["layer_norm"].layer_norm(x, w, b, 1e-5)}


def _eager() -> dict[str, Callable]:
    import torch
    import torch.nn.functional as F  # noqa: N812

    return {"softmax": lambda x: torch.softmax(x, -1), "log_softmax": lambda x: torch.log_softmax(x, -1),
            "rms_norm": lambda x, w: F.rms_norm(x, x.shape[-1:], w, 1e-6),
            "rms_norm_add": lambda x, r, w: (F.rms_norm(x + r, x.shape[-1:], w, 1e-6), x + r),
            "layer_norm": lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b, 1e-5)}


def _liger() -> dict[str, Callable]:
    fn = "liger_kernel.transformers.functional"
    out = {}
    if (sm := _peer(fn, "liger_softmax")) is not None:
        out["softmax"] = sm
    if (rms := _peer(fn, "liger_rms_norm")) is not None:
        out["rms_norm"] = lambda x, w: rms(x, w, 1e-6, 0.0, "llama", False)
    if (ln := _peer(fn, "liger_layer_norm")) is not None:
        out["layer_norm"] = lambda x, w, b: ln(x, w, b, 1e-5)
    if (add := _peer(fn, "liger_fused_add_rms_norm")) is not None:
        out["rms_norm_add"] = lambda x, r, w: add(x, r, w, 1e-6)
    return out


def _quack() -> dict[str, Callable]:
    out = {}
    if (sm := _peer("quack.softmax", "softmax")) is not None:
        out["softmax"] = sm
    if (rms := _peer("quack.rmsnorm", "rmsnorm")) is not None:
        out["rms_norm"] = lambda x, w: rms(x, w, eps=1e-6)
        out["rms_norm_add"] = lambda x, r, w: rms(x, w, residual=r, eps=1e-6, prenorm=True)
    if (ln := _peer("quack.rmsnorm", "layernorm_fwd")) is not None:  # forward only; fp32 weight and bias
        out["layer_norm"] = lambda x, w, b: ln(x, w.float(), b.float(), eps=1e-5)
    return out


def implementations() -> dict[str, dict[str, Callable]]:
    """impl -> op -> callable of the op's inputs (missing ops: the peer has none)."""
    import torch

    cfg = torch._dynamo.config  # one static graph per shape and mode: room for all of them
    setattr(cfg, "recompile_limit" if hasattr(cfg, "recompile_limit") else "cache_size_limit", 256)
    eager = _eager()
    impls = {"kernelagent-triton": _ours("triton"), "kernelagent-cute": _ours("cute"), "eager": eager,
             "torch.compile": {op: torch.compile(fn, dynamic=False) for op, fn in eager.items()},
             "liger": _liger(), "quack": _quack()}
    return {k: v for k, v in impls.items() if v}


def make_inputs(op: str, m: int, n: int) -> list[Any]:
    import torch

    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    w = (1.0 + 0.1 * torch.randn(n, device="cuda")).to(torch.bfloat16)
    if op in ("softmax", "log_softmax"):
        return [x]
    if op == "rms_norm":
        return [x, w]
    if op == "rms_norm_add":
        return [x, torch.randn_like(x), w]
    return [x, w, (0.1 * torch.randn(n, device="cuda")).to(torch.bfloat16)]


# -------------------------------------------------------------------------------------------- timing


def _outputs(out: Any) -> list[Any]:
    return list(out) if isinstance(out, tuple) else [out]


def _calls(fn: Callable, inputs: list[Any], mode: str) -> Callable[[], Any]:
    """A no-argument call doing one `mode` step on `inputs` (gradients of every floating input)."""
    import torch

    if mode == "forward":
        return lambda: fn(*inputs)
    leaves = [t.detach().requires_grad_(True) for t in inputs]
    if mode == "forward+backward":
        grads = [torch.randn_like(o) for o in _outputs(fn(*leaves))]

        def step() -> None:
            torch.autograd.backward(_outputs(fn(*leaves)), grads)
            for t in leaves:
                t.grad = None
        return step
    outs = _outputs(fn(*leaves))
    grads = [torch.randn_like(o) for o in outs]
    return lambda: torch.autograd.grad(outs, leaves, grads, retain_graph=True)


def timed(fn: Callable, sets: list[list[Any]], mode: str) -> dict[str, Any]:
    from kernelagent.verifier.measure.timing import measure

    t = measure([_calls(fn, s, mode) for s in sets], warmup_ms=10.0, rep_ms=60.0, min_reps=20)
    return {"median_ms": t.median_ms, "iqr_ms": t.q3_ms - t.q1_ms, "method": t.method}


def _check(fn: Callable, ref: Callable, inputs: list[Any]) -> float:
    got, want = _outputs(fn(*inputs))[0].float(), _outputs(ref(*inputs))[0].float()
    return float((got - want).norm() / want.norm().clamp_min(1e-30))


def run_case(op: str, m: int, n: int, impls: dict[str, dict[str, Callable]], copy_tbps: float,
             deadline: float) -> list[dict[str, Any]]:
    """Every implementation of `op` on [m, n] in every mode (rows with `error` where one failed)."""
    import torch

    sets = [make_inputs(op, m, n) for _ in range(2)]
    unit = m * n * 2  # bytes of one bf16 [m, n] tensor
    rows = []
    for name, table in impls.items():
        fn = table.get(op)
        if fn is None:
            continue
        base = {"op": op, "impl": name, "m": m, "n": n, "dtype": "bfloat16"}
        try:
            err = _check(fn, impls["eager"][op], sets[0])
        except Exception as e:  # noqa: BLE001 - a peer that cannot run this shape is a row, not a crash
            rows.append({**base, "mode": "forward", "error": f"{type(e).__name__}: {str(e)[:200]}"})
            continue
        for mode in MODES:
            if time.monotonic() > deadline:
                rows.append({**base, "mode": mode, "error": "skipped: time budget spent"})
                continue
            if mode != "forward" and name == "quack" and op == "layer_norm":
                continue  # quack's layernorm has no autograd
            row = {**base, "mode": mode, "rel_err_vs_eager": err}
            try:
                row.update(timed(fn, sets, mode))
                fwd, bwd = UNITS[op]
                units = {"forward": fwd, "backward": bwd, "forward+backward": fwd + bwd}[mode]
                row["tb_per_s"] = units * unit / (row["median_ms"] * 1e-3) / 1e12
                if copy_tbps:
                    row["pct_of_copy_bw"] = 100 * row["tb_per_s"] / copy_tbps
            except Exception as e:  # noqa: BLE001
                row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
            rows.append(row)
            print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
        torch.cuda.empty_cache()
    return rows


def verdicts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Where the targets are met or missed, and by how much (the card says so)."""
    out = []
    by_key: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        if "median_ms" in r:
            by_key.setdefault((r["op"], r["m"], r["n"], r["mode"]), {})[r["impl"]] = r
    for (op, m, n, mode), got in sorted(by_key.items()):
        for ours in ("kernelagent-triton", "kernelagent-cute"):
            if ours not in got:
                continue
            peers = {k: v["median_ms"] for k, v in got.items() if not k.startswith("kernelagent") and k != "eager"}
            best = min(peers.values()) if peers else None
            v = {"op": op, "m": m, "n": n, "mode": mode, "impl": ours, "tb_per_s": got[ours]["tb_per_s"],
                 "faster_than_best_peer": best is None or got[ours]["median_ms"] < best,
                 "vs_best_peer": None if best is None else best / got[ours]["median_ms"]}
            if (m, n) == MAIN_SHAPE and mode in TARGETS:
                v["target_tb_per_s"] = TARGETS[mode]
                v["meets_target"] = got[ours]["tb_per_s"] >= TARGETS[mode]
            out.append(v)
    return out


def bench(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from benchmarks.common import METHOD, write_result
    from kernelagent.verifier.measure.ceilings import load_ceilings

    deadline = time.monotonic() + args.budget
    ceil = load_ceilings(torch.cuda.get_device_name())
    copy_tbps = (ceil.get("copy_gbps") or 0) / 1e3
    impls = implementations()
    ops = [o for o in OPS if not args.only or o in args.only.split(",")]
    cases = [] if args.sweep_only else [(op, *MAIN_SHAPE) for op in ops]
    sweep_ops = OPS if args.full else SWEEP_OPS
    widths = tuple(int(w) for w in args.widths.split(",")) if args.widths else SWEEP_N_FULL if args.full else SWEEP_N
    for n in widths:
        cases += [(op, SWEEP_ELEMENTS // n, n) for op in ops if op in sweep_ops]
    rows: list[dict[str, Any]] = []
    result: dict[str, Any] = {}
    for op, m, n in cases:
        rows += run_case(op, m, n, impls, copy_tbps, deadline)
        result = {"method": METHOD, "ceilings": ceil, "rows": rows, "verdicts": verdicts(rows),
                  "impls": sorted(impls), "missing_peers": sorted({"liger", "quack"} - set(impls)),
                  "bytes_note": "tb_per_s counts the minimum bytes: each input read once, each output written once "
                                "(forward+backward: both; weights and per-row statistics left out)"}
        write_result("rowwise_peers", result)  # after each case: a cut-off run keeps what it measured
    png = plot(result, Path(args.out_dir or _out_dir()) / "rowwise_peers.png")
    print(f"wrote {png}")
    return result


def _out_dir() -> Path:
    from benchmarks.common import out_dir

    return out_dir()


# ---------------------------------------------------------------------------------------------- tuning


TUNE_FAMILIES = ("softmax", "rms_norm", "layer_norm")
TUNE_WIDTHS = (256, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
# The norms' backward past the in-register table: the split path (row dots, then [rows, block] tiles)
# as (column block, rows per tile, num_warps, programs per SM), its row-dot kernel (column block,
# num_warps), and the looped kernel (column block, num_warps, programs per SM).
SPLIT_GRID = ((2048, 1, 8, 2), (2048, 2, 8, 1), (2048, 2, 16, 1), (1024, 1, 4, 4), (1024, 2, 8, 2),
              (1024, 2, 4, 3), (4096, 1, 16, 1), (4096, 2, 16, 1), (4096, 1, 8, 1))
DOT_GRID = ((2048, 8), (1024, 4), (2048, 4), (4096, 8))
LOOP_GRID = ((4096, 8, 1), (8192, 16, 1), (4096, 8, 2), (2048, 4, 4))
LOOP_FWD_GRID = ((1024, 4), (1024, 8), (2048, 4), (2048, 8), (4096, 8), (4096, 16))  # (column block, num_warps)


def _norm_bwd_variants(block: int) -> list[dict[str, Any]]:
    """Module attributes to set, one dict per alternative, for the norms' backward at a padded width."""
    out: list[dict[str, Any]] = []
    if block <= 16384:  # in registers (wider rows spill: ptxas for sm_90)
        out += [{"BWD_TABLE": ((block, rows, warps, per_sm),)} for rows in (1, 2, 4, 8, 16) for warps in (4, 8, 16, 32)
                for per_sm in (1, 2, 4) if 1024 <= rows * block <= 16384 and warps * 32 * 4 <= rows * block]
    if block >= 4096:
        off = {"BWD_TABLE": ()}
        out += [dict(off, SPLIT_BWD=(1, *cfg), DOT_BWD=DOT_GRID[0]) for cfg in SPLIT_GRID]
        out += [dict(off, SPLIT_BWD=(1, *SPLIT_GRID[0]), DOT_BWD=dot) for dot in DOT_GRID[1:]]
        out += [dict(off, SPLIT_BWD=(1 << 40, *SPLIT_GRID[0]), LOOP_BWD=loop) for loop in LOOP_GRID]
    return out


def _time_variant(mod: Any, attrs: dict[str, Any], fn: Callable, sets: list[list[Any]], mode: str) -> float | None:
    saved = {k: getattr(mod, k) for k in attrs}
    for k, v in attrs.items():
        setattr(mod, k, v)
    try:
        return timed(fn, sets, mode)["median_ms"]
    except Exception as e:  # noqa: BLE001 - out of resources: not a candidate
        print(f"{mod.__name__} {mode} {attrs}: {type(e).__name__}", flush=True)
        return None
    finally:
        for k, v in saved.items():
            setattr(mod, k, v)


def tune(args: argparse.Namespace) -> dict[str, Any]:
    """Time launch-table alternatives of the Triton kernels (softmax, rms_norm, layer_norm; forward and
    backward) at a fixed 2**27 elements per width; print the best per width, to paste into the tables.
    The norms' backward also tries the split and looped paths (attributes: see _norm_bwd_variants).
    --only picks families, --widths row lengths, --tune-mode forward or backward. Beside the best, the same
    run times the launch tables as they stand and torch.compile of the eager op (same method, same pass)."""
    import torch

    from benchmarks.common import METHOD, write_result

    families = [f for f in TUNE_FAMILIES if not args.only or f in args.only.split(",")]
    widths = tuple(int(w) for w in args.widths.split(",")) if args.widths else TUNE_WIDTHS
    modes = ("forward", "backward") if args.tune_mode == "both" else (args.tune_mode,)
    fwd_grid = [(rows, warps) for rows in (1, 2, 4, 8, 16, 32, 64) for warps in (4, 8, 16)]
    bwd_grid = [(rows, warps) for rows in (1, 2, 4, 8, 16) for warps in (4, 8, 16)]  # softmax
    out: dict[str, Any] = {"forward": {}, "backward": {}}
    deadline = time.monotonic() + args.budget
    for family in families:
        mod = importlib.import_module(f"kernelagent.kernels.{family}.triton")
        fn = _ours("triton")[family]
        compiled = torch.compile(_eager()[family], dynamic=False)
        for n in widths:
            block = 1 << (n - 1).bit_length()
            sets = [make_inputs(family, SWEEP_ELEMENTS // n, n) for _ in range(2)]
            for mode in modes:
                if mode == "forward":
                    variants = [{"FWD_TABLE": ((block, *cfg),)} for cfg in fwd_grid if cfg[0] * block <= 65536]
                    if family != "softmax" and block >= 2048:  # the norms' looped two-pass kernel (L2 re-read)
                        variants += [{"FWD_TABLE": (), "LOOP_FWD": cfg} for cfg in LOOP_FWD_GRID if cfg[0] < block]
                elif family == "softmax":
                    variants = [{"BWD_TABLE": ((block, *cfg),)} for cfg in bwd_grid if cfg[0] * block <= 65536]
                else:
                    variants = _norm_bwd_variants(block)
                best = None
                for attrs in variants:
                    if time.monotonic() > deadline:
                        break
                    ms = _time_variant(mod, attrs, fn, sets, mode)
                    if ms is not None and (best is None or ms < best[1]):
                        best = (attrs, ms)
                units = UNITS[family][0 if mode == "forward" else 1]
                def tbps(ms: float | None, units: int = units) -> float | None:
                    return None if ms is None else units * SWEEP_ELEMENTS * 2 / (ms * 1e-3) / 1e12
                row = {"best": None if best is None else (*best, tbps(best[1])),
                       "current_ms": _time_variant(mod, {}, fn, sets, mode),
                       "compile_ms": _time_variant(mod, {}, compiled, sets, mode)}
                row.update(current_tbps=tbps(row["current_ms"]), compile_tbps=tbps(row["compile_ms"]))
                out[mode].setdefault(family, {})[n] = row
                print(family, mode, n, json.dumps(row, default=str), flush=True)
            del sets
    write_result("rowwise_tuning", {"tuning": out, "elements": SWEEP_ELEMENTS, "method": METHOD,
                                    "note": "per width: best = (module attributes set, ms, TB/s), table entries "
                                    "(padded width, rows, num_warps[, per SM]); current = the launch tables as "
                                    "committed; compile = torch.compile of the eager op"})
    return out


# --------------------------------------------------------------------------------------------- cards


def card_rows(data: dict[str, Any], family: str, source: str) -> list[dict[str, Any]]:
    """The card's `measured` rows for `family` from a rowwise_peers results file: [32768, 8192], each mode
    and backend, with every peer's median from the same run and the targets missed."""
    env = data["environment"]
    ops = ("rms_norm", "rms_norm_add") if family == "rms_norm" else (family,)
    out = []
    for op in ops:
        for mode in MODES:
            got = {r["impl"]: r for r in data["rows"] if r["op"] == op and r.get("mode") == mode
                   and (r["m"], r["n"]) == MAIN_SHAPE and "median_ms" in r}
            for backend in ("triton", "cute"):
                ours = got.get(f"kernelagent-{backend}")
                if ours is None:
                    continue
                row = {"date": env["date"], "gpu": env["gpu"], "torch": env["torch"], "triton": env["triton"],
                       "cutlass_dsl": env.get("cutlass_dsl"), "backend": backend, "shape": SHAPE_TEXT[op],
                       "mode": mode, "median_ms": round(ours["median_ms"], 4), "tb_per_s": round(ours["tb_per_s"], 3),
                       "peers_ms": {k: round(v["median_ms"], 4) for k, v in got.items()
                                    if not k.startswith("kernelagent")},
                       "method": data["method"], "source": source}
                if "pct_of_copy_bw" in ours:
                    row["pct_of_copy_bw"] = round(ours["pct_of_copy_bw"], 1)
                if mode in TARGETS and ours["tb_per_s"] < TARGETS[mode]:
                    row["misses"] = f"{TARGETS[mode]} TB/s target: {ours['tb_per_s']:.2f} TB/s"
                out.append(row)
    return out


def card_markdown(rows: list[dict[str, Any]]) -> str:
    lines = [BEGIN, "## Measured", ""]
    for r in rows:
        peers = " · ".join(f"{k} {v * 1e3:.0f} µs" for k, v in r["peers_ms"].items())
        miss = f" (misses the {r['misses']})" if "misses" in r else ""
        lines.append(f"- {r['backend']}, {r['mode']}, {r['shape']}: **{r['median_ms'] * 1e3:.0f} µs**, "
                     f"{r['tb_per_s']:.2f} TB/s{miss}; same run: {peers}")
    r0 = rows[0]
    lines += ["", f"{r0['gpu']}, {r0['date']}, torch {r0['torch']}, triton {r0['triton']}, nvidia-cutlass-dsl "
              f"{r0['cutlass_dsl']}; {r0['method']}. Source: `{r0['source']}` (written by "
              "`benchmarks/rowwise_peers.py`).", END]
    return "\n".join(lines)


def update_cards(path: Path) -> list[str]:
    """Copy the figures of a results file into the row-wise cards (card.json `measured`, card.md block)."""
    data = json.loads(path.read_text())
    source = str(path.resolve().relative_to(ROOT))
    done = []
    for family in ("softmax", "log_softmax", "rms_norm", "layer_norm"):
        rows = card_rows(data, family, source)
        if not rows:
            continue
        write_measured(ROOT / "kernelagent" / "kernels" / family, rows, card_markdown(rows))
        done.append(family)
    return done


# ------------------------------------------------------------------------------------------------ plot
# A small PNG writer (zlib + struct) and a 5x7 font: no plotting library on the GPU machine.

_FONT = {  # 5 columns x 7 rows, one int per row, bit 4 = leftmost column
    "0": (14, 17, 19, 21, 25, 17, 14), "1": (4, 12, 4, 4, 4, 4, 14), "2": (14, 17, 1, 2, 4, 8, 31),
    "3": (31, 2, 4, 2, 1, 17, 14), "4": (2, 6, 10, 18, 31, 2, 2), "5": (31, 16, 30, 1, 1, 17, 14),
    "6": (6, 8, 16, 30, 17, 17, 14), "7": (31, 1, 2, 4, 8, 8, 8), "8": (14, 17, 17, 14, 17, 17, 14),
    "9": (14, 17, 17, 15, 1, 2, 12), "a": (0, 0, 14, 1, 15, 17, 15), "b": (16, 16, 22, 25, 17, 17, 30),
    "c": (0, 0, 14, 16, 16, 17, 14), "d": (1, 1, 13, 19, 17, 17, 15), "e": (0, 0, 14, 17, 31, 16, 14),
    "f": (6, 9, 8, 28, 8, 8, 8), "g": (0, 0, 15, 17, 15, 1, 14), "h": (16, 16, 22, 25, 17, 17, 17),
    "i": (4, 0, 12, 4, 4, 4, 14), "j": (2, 0, 6, 2, 2, 18, 12), "k": (16, 16, 18, 20, 24, 20, 18),
    "l": (12, 4, 4, 4, 4, 4, 14), "m": (0, 0, 26, 21, 21, 17, 17), "n": (0, 0, 22, 25, 17, 17, 17),
    "o": (0, 0, 14, 17, 17, 17, 14), "p": (0, 0, 30, 17, 30, 16, 16), "q": (0, 0, 13, 19, 15, 1, 1),
    "r": (0, 0, 22, 25, 16, 16, 16), "s": (0, 0, 14, 16, 14, 1, 30), "t": (8, 8, 28, 8, 8, 9, 6),
    "u": (0, 0, 17, 17, 17, 19, 13), "v": (0, 0, 17, 17, 17, 10, 4), "w": (0, 0, 17, 17, 21, 21, 10),
    "x": (0, 0, 17, 10, 4, 10, 17), "y": (0, 0, 17, 17, 15, 1, 14), "z": (0, 0, 31, 2, 4, 8, 31),
    ".": (0, 0, 0, 0, 0, 12, 12), "-": (0, 0, 0, 31, 0, 0, 0), "+": (0, 4, 4, 31, 4, 4, 0),
    "/": (0, 1, 2, 4, 8, 16, 0), ":": (0, 12, 12, 0, 12, 12, 0), "_": (0, 0, 0, 0, 0, 0, 31),
    "(": (2, 4, 8, 8, 8, 4, 2), ")": (8, 4, 2, 2, 2, 4, 8), " ": (0,) * 7, "[": (14, 8, 8, 8, 8, 8, 14),
    "]": (14, 2, 2, 2, 2, 2, 14), ",": (0, 0, 0, 0, 12, 4, 8), "=": (0, 0, 31, 0, 31, 0, 0),
}
_COLORS = [(31, 119, 180), (214, 39, 40), (127, 127, 127), (255, 127, 14), (44, 160, 44), (148, 103, 189),
           (140, 86, 75), (23, 190, 207)]


class _Canvas:
    def __init__(self, width: int, height: int):
        self.w, self.h = width, height
        self.px = bytearray(b"\xff" * (width * height * 3))

    def dot(self, x: int, y: int, color: tuple[int, int, int]) -> None:
        if 0 <= x < self.w and 0 <= y < self.h:
            i = (y * self.w + x) * 3
            self.px[i:i + 3] = bytes(color)

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: tuple[int, int, int]) -> None:
        for y in range(y0, y1):
            for x in range(x0, x1):
                self.dot(x, y, color)

    def line(self, x0: float, y0: float, x1: float, y1: float, color: tuple[int, int, int], thick: int = 1) -> None:
        steps = int(max(abs(x1 - x0), abs(y1 - y0), 1))
        for s in range(steps + 1):
            x, y = x0 + (x1 - x0) * s / steps, y0 + (y1 - y0) * s / steps
            half = thick // 2
            self.rect(int(x) - half, int(y) - half, int(x) + thick - half, int(y) + thick - half, color)

    def text(self, x: int, y: int, s: str, color: tuple[int, int, int] = (0, 0, 0), scale: int = 1) -> None:
        for k, ch in enumerate(s.lower()):
            for row, bits in enumerate(_FONT.get(ch, _FONT[" "])):
                for col in range(5):
                    if bits >> (4 - col) & 1:
                        self.rect(x + (k * 6 + col) * scale, y + row * scale, x + (k * 6 + col + 1) * scale,
                                  y + (row + 1) * scale, color)

    def png(self) -> bytes:
        raw = b"".join(b"\x00" + bytes(self.px[y * self.w * 3:(y + 1) * self.w * 3]) for y in range(self.h))

        def chunk(kind: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

        header = struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)
        body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
        return b"\x89PNG\r\n\x1a\n" + body


def _panel(c: _Canvas, x0: int, y0: int, w: int, h: int, title: str, lines: dict[str, list[tuple[int, float]]],
           colors: dict[str, tuple[int, int, int]], ymax: float, ns: list[int]) -> None:
    c.text(x0, y0 - 14, title, scale=1)
    c.line(x0, y0 + h, x0 + w, y0 + h, (0, 0, 0))
    c.line(x0, y0, x0, y0 + h, (0, 0, 0))
    lo, hi = math.log2(min(ns)), math.log2(max(ns))
    xs = lambda n: x0 + (math.log2(n) - lo) / max(hi - lo, 1) * (w - 10) + 5  # noqa: E731
    ys = lambda v: y0 + h - v / ymax * h  # noqa: E731
    for t in range(int(ymax) + 1):
        c.line(x0 - 3, ys(t), x0 + w, ys(t), (225, 225, 225))
        c.text(x0 - 12, int(ys(t)) - 3, str(t))
    for n in ns:
        c.text(int(xs(n)) - 8, y0 + h + 5, f"{n // 1024}k")
    for name, pts in lines.items():
        pts = sorted(pts)
        for (na, va), (nb, vb) in zip(pts, pts[1:], strict=False):
            c.line(xs(na), ys(va), xs(nb), ys(vb), colors[name], thick=2)
        for n, v in pts:
            c.rect(int(xs(n)) - 2, int(ys(v)) - 2, int(xs(n)) + 3, int(ys(v)) + 3, colors[name])


def plot(result: dict[str, Any], path: Path) -> Path:
    """TB/s against row length, one panel per (op, mode) of the sweep, one line per implementation."""
    rows = [r for r in result.get("rows", []) if "tb_per_s" in r and r["m"] * r["n"] == SWEEP_ELEMENTS]
    panels = sorted({(r["op"], r["mode"]) for r in rows}, key=lambda k: (OPS.index(k[0]), MODES.index(k[1])))
    impls = sorted({r["impl"] for r in rows})
    colors = {name: _COLORS[i % len(_COLORS)] for i, name in enumerate(impls)}
    cols, pw, ph = 3, 300, 200
    nrows = max(1, -(-len(panels) // cols))
    c = _Canvas(cols * (pw + 60) + 40, nrows * (ph + 60) + 90)
    c.text(20, 10, "tb/s against row length (bf16, 134m elements a case, copy ceiling 4.27)", scale=2)
    for i, name in enumerate(impls):
        c.rect(20 + i * 150, 40, 32 + i * 150, 46, colors[name])
        c.text(36 + i * 150, 40, name)
    ns = sorted({r["n"] for r in rows}) or [1024]
    ymax = max([4.5] + [r["tb_per_s"] for r in rows])
    for k, (op, mode) in enumerate(panels):
        lines: dict[str, list[tuple[int, float]]] = {}
        for r in rows:
            if (r["op"], r["mode"]) == (op, mode):
                lines.setdefault(r["impl"], []).append((r["n"], r["tb_per_s"]))
        _panel(c, 50 + (k % cols) * (pw + 60), 90 + (k // cols) * (ph + 60), pw, ph, f"{op} {mode}", lines, colors,
               math.ceil(ymax), ns)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(c.png())
    return path


# ------------------------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--budget", type=float, default=210.0, help="seconds before no new measurement starts")
    p.add_argument("--only", default="", help="comma-separated ops")
    p.add_argument("--full", action="store_true", help="every op and 9 row lengths in the sweep (longer)")
    p.add_argument("--tune", action="store_true", help="time launch-table alternatives instead")
    p.add_argument("--widths", default="", help="comma-separated row lengths: the sweep's (default SWEEP_N), or "
                                                "--tune's (default TUNE_WIDTHS)")
    p.add_argument("--sweep-only", action="store_true", help="leave out the [32768, 8192] cases")
    p.add_argument("--tune-mode", choices=("forward", "backward", "both"), default="both", help="--tune: which pass")
    p.add_argument("--plot", type=Path, help="redraw the PNG of a results file (no GPU needed)")
    p.add_argument("--cards", type=Path, help="copy a results file's figures into the cards (no GPU needed)")
    p.add_argument("--out-dir", default="", help="where the PNG goes (default: $OUT or benchmarks/results)")
    args = p.parse_args(argv)
    if args.plot:
        print(plot(json.loads(args.plot.read_text()), args.plot.with_suffix(".png")))
    elif args.cards:
        print(update_cards(args.cards))
    elif args.tune:
        tune(args)
    else:
        bench(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
