"""Probe (H200): the CuTe DSL attention forward at other key-tile widths than its default (FA3 takes 176 keys a
tile at head dim 128 and 192 at 64 without a causal mask), B=2 H=16 S=8192 bf16, causal and not: each
setting's time (triton.testing.do_bench median, warmup 25 ms, rep 100 ms, L2 flushed) and its output against
SDPA's (relative L2). Writes attention_fwd_tiles.json (benchmarks.common.write_result: $OUT or
benchmarks/results).

  source .carry/setup.sh && PYTHONPATH=$PWD python3 benchmarks/probes/attention_fwd_tiles.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from benchmarks.common import median_ms as _ms  # noqa: E402
from benchmarks.common import write_result  # noqa: E402
from kernelagent.kernels.attention import cute as ac  # noqa: E402

B, S, H = 2, 8192, 16
SETTINGS = {128: [(128, 2), (160, 2), (176, 2)], 64: [(128, 3), (192, 2)]}  # (tile_n, stages)
METHOD = "triton.testing.do_bench median (warmup 25 ms, rep 100 ms, L2 flushed) after a first (compiling) call"


def _case(d: int, causal: bool, tile_n: int, stages: int, sdpa: torch.Tensor, qkv) -> dict:
    base = ac._tiles
    ac._tiles = lambda *a: {**base(*a), "tile_n": tile_n, "stages": stages}
    try:
        window = (None, 0) if causal else (None, None)
        call = lambda: ac.attention_forward(*qkv, d ** -0.5, None, window)  # noqa: E731
        out = call()[0]
        ms = _ms(call)
    finally:
        ac._tiles = base
    rel = float((out.double() - sdpa.double()).norm() / sdpa.double().norm())
    tflops = 4 * B * H * S * S * d / (2 if causal else 1) / ms / 1e9
    return {"d": d, "causal": causal, "tile_n": tile_n, "stages": stages, "ms": ms, "tflops": tflops,
            "rel_vs_sdpa": rel}


def main() -> int:
    rows = []
    for d, settings in SETTINGS.items():
        gen = torch.Generator(device="cuda").manual_seed(0)
        qkv = [torch.randn(B, S, H, d, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
        for causal in (False, True):
            sdpa = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in qkv), is_causal=causal).transpose(1, 2)
            for tile_n, stages in settings:
                try:
                    rows.append(_case(d, causal, tile_n, stages, sdpa, qkv))
                except Exception as e:  # noqa: BLE001 - a setting that fails is a row
                    rows.append({"d": d, "causal": causal, "tile_n": tile_n, "stages": stages,
                                 "error": f"{type(e).__name__}: {str(e)[:500]}"})
                print(json.dumps(rows[-1]), flush=True)
                write_result("attention_fwd_tiles", {"method": METHOD, "shape": [B, S, H], "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
