"""Where the attention backward's time goes (GPU), at the headline shape B=2 H=16 S=8192 D=128 bf16:
the whole backward (delta and key-mean preprocess, the dK/dV kernel, the dQ kernel) autotuned, causal
and not, with the configs picked; then, non-causal and untuned, every tile of each kernel with the
other kept at its default. BEFORE=path/to/an/older/triton.py adds that file's autotuned backward to
the same run (e.g. `git show REV:kernelagent/kernels/attention/triton.py > old.py`).

  python3 benchmarks/probes/attention_bwd.py            prints one JSON line per measurement
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import load_module as _load  # noqa: E402

SOURCE = ROOT / "kernelagent" / "kernels" / "attention" / "triton.py"
B, S, H, D = 2, 8192, 16, 128


def _timer(mod, q, k, v, do, out, stats, window):
    def call():
        return mod._bwd_launch(do, q, k, v, out, stats, None, None, None, S, S, D ** -0.5, None, window)
    return call


def _ms(call) -> float:
    import torch
    import triton

    call()
    torch.cuda.synchronize()
    return float(triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median"))


def _picked(mod) -> dict:
    """The configs the autotuners picked (their last key)."""
    picked = {}
    for name in ("_DKDV", "_DQ", "_BWD"):
        tuner = getattr(mod, name, None)
        if tuner is not None and getattr(tuner, "cache", None):
            picked[name] = str(list(tuner.cache.values())[-1])
    return picked


def main() -> None:
    import torch

    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = (torch.randn(B, S, H, D, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    flops = 2.5 * 4 * B * H * S * S * D
    mods = {"current": _load(SOURCE, "attn_current")}
    if os.environ.get("BEFORE"):
        mods["before"] = _load(Path(os.environ["BEFORE"]), "attn_before")
    for label, mod in mods.items():
        for causal in (False, True):
            window = (None, 0) if causal else (None, None)
            out, _lse, stats = mod._fwd_launch(q, k, v, None, None, S, S, D ** -0.5, None, window)
            ms = _ms(_timer(mod, q, k, v, do, out, stats, window))
            tf = flops / (2 if causal else 1) / ms / 1e9
            print(json.dumps({"file": label, "causal": causal, "tuned_ms": round(ms, 3), "tflops": round(tf, 1),
                              "picked": _picked(mod)}), flush=True)
    mod = mods["current"]
    mod.TUNE_MIN = 1 << 62  # untuned: the defaults below
    out, _lse, stats = mod._fwd_launch(q, k, v, None, None, S, S, D ** -0.5, None, (None, None))
    call = _timer(mod, q, k, v, do, out, stats, (None, None))
    want = [g.float() for g in call()]
    defaults = {"dkdv": dict(mod.BWD_DEFAULT), "dq": dict(mod.DQ_DEFAULT)}
    for kernel, table, default in (("dkdv", mod.BWD_TABLE, mod.BWD_DEFAULT), ("dq", mod.DQ_TABLE, mod.DQ_DEFAULT)):
        for bm, bn, warps, stages, max_d in table:
            if max_d < D:
                continue
            default[D] = (bm, bn, warps, stages)
            row = {"kernel": kernel, "tile": [bm, bn, warps, stages]}
            try:
                got = call()
                row["rel_err"] = [round(float((g.float() - w).norm() / w.norm()), 5)
                                  for g, w in zip(got, want, strict=True)]
                row["ms"] = round(_ms(call), 3)
            except Exception as exc:  # a tile that does not fit: recorded, the sweep goes on
                row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            print(json.dumps(row), flush=True)
        default.clear()
        default.update(defaults[kernel])


if __name__ == "__main__":
    main()
