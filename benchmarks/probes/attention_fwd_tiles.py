"""Probe (H200): the CuTe DSL attention forward under other settings of FlashFwdSm90 than its defaults, B=2 H=16 S=8192
bf16, causal and not: each setting's time (triton.testing.do_bench median, warmup 25 ms, rep 100 ms, L2 flushed) and
its output against SDPA's (relative L2). KA_PROBE_VARIANTS picks a group: "tiles" (default), other key-tile widths
(FA3 takes 176 keys a tile at head dim 128 and 192 at 64 without a causal mask). The groups "exp" and "lazy" of
commit cbd8d81 timed its options `fma_exp`, `sum_tree` (the kernel's only path since, with the base rounded by
mul.rn from 38c38a8) and `lazy_rescale` (removed as slower). Each setting is timed in turn over KA_PROBE_ROUNDS
rounds (default 1), since one process's forward timings drift. Writes attention_fwd_<group>.json
(benchmarks.common.write_result: $OUT or benchmarks/results).

  source .carry/setup.sh && PYTHONPATH=$PWD python3 benchmarks/probes/attention_fwd_tiles.py
"""

from __future__ import annotations

import json
import os
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
# per group: head dim -> [(name, FlashFwdSm90 options)], and the rounds each setting is timed
GROUPS = {
    "tiles": ({128: [("n128", {"tile_n": 128, "stages": 2}), ("n160", {"tile_n": 160, "stages": 2}),
                     ("n176", {"tile_n": 176, "stages": 2})],
               64: [("n128", {"tile_n": 128, "stages": 3}), ("n192", {"tile_n": 192, "stages": 2})]},
              int(os.environ.get("KA_PROBE_ROUNDS", "1"))),
}
GROUP = os.environ.get("KA_PROBE_VARIANTS", "tiles")
METHOD = "triton.testing.do_bench median (warmup 25 ms, rep 100 ms, L2 flushed) after a first (compiling) call"


def _case(d: int, causal: bool, options: dict, sdpa: torch.Tensor, qkv) -> dict:
    base = ac._tiles
    ac._tiles = lambda *a: {**base(*a), **options}
    try:
        window = (None, 0) if causal else (None, None)
        call = lambda: ac.attention_forward(*qkv, d ** -0.5, None, window)  # noqa: E731
        out, lse, _ = call()
        ms = _ms(call)
    finally:
        ac._tiles = base
    rel = float((out.double() - sdpa.double()).norm() / sdpa.double().norm())
    tflops = 4 * B * H * S * S * d / (2 if causal else 1) / ms / 1e9
    return {"d": d, "causal": causal, **options, "ms": ms, "tflops": tflops, "rel_vs_sdpa": rel,
            "lse_sum": float(lse.double().sum())}


def main() -> int:
    rows = []
    settings, rounds = GROUPS[GROUP]
    for d, named in settings.items():
        gen = torch.Generator(device="cuda").manual_seed(0)
        qkv = [torch.randn(B, S, H, d, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
        for causal in (False, True):
            sdpa = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in qkv), is_causal=causal).transpose(1, 2)
            for rnd in range(rounds):
                for name, options in named:
                    try:
                        row = _case(d, causal, options, sdpa, qkv)
                    except Exception as e:  # noqa: BLE001 - a setting that fails is a row
                        row = {"d": d, "causal": causal, **options, "error": f"{type(e).__name__}: {str(e)[:500]}"}
                    rows.append({"setting": name, "round": rnd, **row})
                    print(json.dumps(rows[-1]), flush=True)
                    write_result(f"attention_fwd_{GROUP}", {"method": METHOD, "shape": [B, S, H], "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
