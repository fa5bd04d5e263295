"""Where the shared attention backward's time goes (GPU): the whole backward (delta preprocess, the
dK/dV/dQ kernel, the dQ conversion) timed per tile and per source variant, at the headline shape
B=2 H=16 S=8192 D=128 bf16, non-causal.

Variants are text patches of kernelagent/kernels/attention/triton.py, imported from a temporary
folder (Triton reads a kernel's source from its file):
  shipped   the file as it is
  no_fix    without the dQ rounding correction (rowsum of the dS rounding times the block's mean key)
  centred   dQ = dS^T (K - mean K) instead: no per-step correction (block mean: timing only)
  no_dq     no dQ at all (its GEMM and atomics; timing only)
Tiles: (BLOCK_M, BLOCK_N, warps, stages), untuned launches. Prints one JSON line per run; stops
starting new runs after PROBE_BUDGET seconds (default 240).

  python3 benchmarks/probes/attention_bwd.py [variant ...]
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "kernelagent" / "kernels" / "attention" / "triton.py"
B, S, H, D = 2, 8192, 16, 128
TILES = ((64, 128, 8, 2), (64, 128, 8, 3), (64, 128, 4, 2), (32, 128, 4, 2), (32, 128, 8, 2),
         (64, 64, 4, 2), (64, 64, 4, 3), (128, 128, 8, 2), (128, 64, 8, 2))
FIX = ("        lost = tl.sum((ds_lo.to(tl.float32) - ds_t) * col_w[:, None], 0)  # rounding of dS, per query\n",
       "        dq -= lost[:, None] * k_mean[None, :]\n")
DQ_DOT = "dq = tl.dot(tl.trans(ds_lo), k)"
HEAD_START = '    dtype = Q.dtype.element_ty\n    cols = n0 + tl.arange(0, BLOCK_N)\n'


def _patched(variant: str) -> str:
    text = SOURCE.read_text()
    if variant == "shipped":
        return text
    for line in FIX:
        assert line in text, line
        text = text.replace(line, "")
    if variant == "centred":
        assert DQ_DOT in text and HEAD_START in text
        text = text.replace(DQ_DOT, "dq = tl.dot(tl.trans(ds_lo), k_c)")
        text = text.replace(HEAD_START, HEAD_START + "    k_c = (k.to(tl.float32) - k_mean[None, :] * "
                            "col_w[:, None]).to(k.dtype)\n", 1)
    if variant == "no_dq":
        text = text.replace("            dq_desc.atomic_add([m0, 0], dq)\n", "            pass\n")
    return text


def _load(variant: str, folder: Path):
    path = folder / f"attn_bwd_{variant}.py"
    path.write_text(_patched(variant))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)
    mod.TUNE_MIN = 1 << 62  # untuned: the tile set below
    return mod


def main(variants: list[str]) -> None:
    import torch
    import triton

    budget = float(os.environ.get("PROBE_BUDGET", "240"))
    started = time.time()
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = (torch.randn(B, S, H, D, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = D ** -0.5
    flops = 2.5 * 4 * B * H * S * S * D
    folder = Path(tempfile.mkdtemp())
    base = _load("shipped", folder)
    out, _lse, stats = base._fwd_launch(q, k, v, None, None, S, S, scale, None, (None, None))
    want = None
    for variant in variants:
        mod = base if variant == "shipped" else _load(variant, folder)
        for tile in TILES:
            if time.time() - started > budget:
                print(json.dumps({"stopped": "budget", "variant": variant, "tile": tile}), flush=True)
                return
            mod.BWD_DEFAULT[128] = tile
            row = {"variant": variant, "tile": tile}
            try:
                t0 = time.time()
                got = mod._bwd_launch(do, q, k, v, out, stats, None, None, None, S, S, scale, None, (None, None))
                torch.cuda.synchronize()
                row["first_s"] = round(time.time() - t0, 1)
                if want is None:
                    want = [g.float() for g in got]
                row["rel_err"] = [round(float((g.float() - w).norm() / w.norm()), 5) for g, w in zip(got, want)]
                ms = triton.testing.do_bench(lambda: mod._bwd_launch(do, q, k, v, out, stats, None, None, None, S, S,
                                                                     scale, None, (None, None)),
                                             warmup=25, rep=100, return_mode="median")
                row.update(ms=round(ms, 3), tflops=round(flops / ms / 1e9, 1))
            except Exception as exc:  # a tile that does not compile or fit: recorded, the sweep goes on
                row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["shipped", "no_fix", "centred", "no_dq"])
