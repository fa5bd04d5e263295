"""Probe (H200): the Triton LayerNorm backward's pipeline depth (layer_norm/triton.py BWD_STAGES: its tile
loop through shared memory, 3..5 stages, or 0: the next tile prefetched into registers) and 32 warps at
8192 columns; each checked against torch's layer_norm backward (fp32 reference; torch's own bf16 error
beside it), then timed by the verifier's method in one run: layer_norm_backward called directly, and at
the headline shape also through autograd as benchmarks/rowwise_peers.py times it. TB/s counts x and dy
read and dx written once (the card's bytes). Writes ln_bwd.json to $OUT. (The results file of
2026-12-03 also holds the kernel before the rewrite, "classic", timed by this probe at commit 0146d24.)

Run: source .carry/setup.sh && PYTHONPATH=$PWD python3 benchmarks/probes/ln_bwd.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from benchmarks.common import METHOD, write_result  # noqa: E402
from kernelagent.kernels.layer_norm import triton as ln  # noqa: E402
from kernelagent.verifier.measure.timing import measure  # noqa: E402

SHAPES = ((32768, 8192), (32768, 4096), (8192, 16384))
HEADLINE = (32768, 8192)
EPS = 1e-5
# name -> module settings; BWD_TABLE None keeps the table
VARIANTS = {
    "registers": {"BWD_STAGES": 0},
    "stages3": {"BWD_STAGES": 3},
    "stages4": {"BWD_STAGES": 4},
    "stages5": {"BWD_STAGES": 5},
    "32warps": {"BWD_STAGES": 0, "BWD_TABLE": ln.BWD_TABLE[:-1] + ((8192, 1, 32, 1),)},
}
SPLIT_VARIANTS = ("registers",)  # rows past BWD_TABLE take the split backward: no stages, no table entry
SAVED = {k: getattr(ln, k) for k in ("BWD_STAGES", "BWD_TABLE")}


def _apply(settings: dict) -> None:
    for k, v in SAVED.items():
        setattr(ln, k, settings.get(k, v))


def _inputs(m: int, n: int, seed: int) -> dict:
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(m, n, device="cuda", generator=g).to(torch.bfloat16)
    dy = torch.randn(m, n, device="cuda", generator=g).to(torch.bfloat16)
    w = (1.0 + 0.1 * torch.randn(n, device="cuda", generator=g)).to(torch.bfloat16)
    b = (0.1 * torch.randn(n, device="cuda", generator=g)).to(torch.bfloat16)
    _, mean, rstd = ln.layer_norm_forward(x, w, b, EPS)
    return {"x": x, "dy": dy, "w": w, "b": b, "mean": mean, "rstd": rstd}


def _torch_grads(s: dict, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    leaves = [s[k].detach().to(dtype).requires_grad_() for k in ("x", "w", "b")]
    y = F.layer_norm(leaves[0], leaves[0].shape[-1:], leaves[1], leaves[2], EPS)
    return torch.autograd.grad(y, leaves, s["dy"].to(dtype))


def _rel(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.float() - want.float()).norm() / want.float().norm().clamp_min(1e-30))


def _resources() -> list[dict]:
    """Registers, spills and shared memory of the backward kernels compiled so far (best effort)."""
    out = []
    for fn in (ln._ln_bwd_kernel, ln._ln_bwd_split_kernel, ln._ln_bwd_dot_kernel,
               ln._column_sum_kernel, ln._column_sum_pair_kernel):
        try:
            for caches in fn.device_caches.values():
                for k in caches[0].values():
                    k._init_handles()
                    consts = {fn.arg_names[i[0]]: v for i, v in getattr(k.src, "constants", {}).items()
                              if isinstance(v, (int, bool)) and fn.arg_names[i[0]].isupper()}
                    out.append({"kernel": fn.__name__, "constexprs": consts, "num_warps": k.metadata.num_warps,
                                "n_regs": k.n_regs, "n_spills": k.n_spills, "shared": k.metadata.shared})
        except Exception as e:  # noqa: BLE001 - diagnostics only
            out.append({"kernel": fn.__name__, "error": f"{type(e).__name__}: {str(e)[:200]}"})
    return out


def main() -> int:
    rows = []
    for m, n in SHAPES:
        sets = [_inputs(m, n, seed) for seed in range(3)]
        ref = _torch_grads(sets[0], torch.float32)
        floor = dict(zip(("dx", "dw", "db"), (_rel(g, r) for g, r in zip(_torch_grads(sets[0], torch.bfloat16), ref,
                                                                              strict=True)), strict=True))
        names = SPLIT_VARIANTS if ln.pick(SAVED["BWD_TABLE"], n) is None else tuple(VARIANTS)
        for name in names:
            _apply(VARIANTS[name])
            row = {"m": m, "n": n, "variant": name, "torch_bf16_rel_err": floor}
            try:
                s0 = sets[0]
                got = ln.layer_norm_backward(s0["x"], s0["w"], s0["b"], s0["dy"], s0["mean"], s0["rstd"])
                row["rel_err"] = {k: _rel(g, r) for k, g, r in zip(("dx", "dw", "db"), got, ref, strict=True)}
                calls = [lambda s=s: ln.layer_norm_backward(s["x"], s["w"], s["b"], s["dy"], s["mean"], s["rstd"])
                         for s in sets]
                t = measure(calls, warmup_ms=10.0, rep_ms=100.0, min_reps=20)
                row.update(median_ms=t.median_ms, iqr_ms=t.q3_ms - t.q1_ms, method=t.method,
                           tb_per_s=3 * m * n * 2 / (t.median_ms * 1e-3) / 1e12)
                if (m, n) == HEADLINE and name in ("registers", "stages3"):
                    # as rowwise_peers.py times the backward: autograd through the registered op
                    graphs = []
                    for s in sets:
                        leaves = [s[k].detach().requires_grad_() for k in ("x", "w", "b")]
                        out = ln.layer_norm(*leaves, EPS)
                        graphs.append((out, leaves, s["dy"]))
                    calls = [lambda g=g: torch.autograd.grad(g[0], g[1], g[2], retain_graph=True) for g in graphs]
                    t = measure(calls, warmup_ms=10.0, rep_ms=100.0, min_reps=20)
                    row.update(autograd_median_ms=t.median_ms, autograd_tb_per_s=3 * m * n * 2 / (t.median_ms * 1e-3)
                               / 1e12)
                    del graphs, calls
            except Exception as e:  # noqa: BLE001 - a failing variant is a row
                row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            rows.append(row)
            print(row, flush=True)
        del sets, ref
        torch.cuda.empty_cache()
    _apply({})
    write_result("ln_bwd", {"method": METHOD, "bytes": "3 * m * n * 2 (x and dy read, dx written once)",
                            "variants": {k: {kk: str(vv) for kk, vv in v.items()} for k, v in VARIANTS.items()},
                            "rows": rows, "kernels": _resources()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
