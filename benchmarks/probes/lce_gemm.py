"""Probe (H200): the three GEMMs of one linear cross-entropy chunk (rows M = 2048 of the issue's shape,
H = 4096, V = 128256, bf16) by the CuTe DSL GEMM of linear_cross_entropy/cute.py, the Triton GEMM of
triton.py and cuBLAS (torch.mm), each checked against cuBLAS and timed by the verifier's method in one
run: logits = hidden @ weight.T (A, B K-major), dhidden = G @ weight (B N-major), dweight += G.T @ hidden
(A M-major, B N-major, accumulating). Then the CuTe DSL tile settings given on the command line as
TM,TN,TK,STAGES,GROUP (e.g. 128,256,64,4,8), the logits product only. Writes lce_gemm.json to $OUT.

Run: source .carry/setup.sh && PYTHONPATH=$PWD python3 benchmarks/probes/lce_gemm.py [TM,TN,TK,STAGES,GROUP ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from benchmarks.common import METHOD, write_result  # noqa: E402
from kernelagent.kernels.linear_cross_entropy import cute as lc  # noqa: E402
from kernelagent.kernels.linear_cross_entropy import triton as lt  # noqa: E402
from kernelagent.verifier.measure.timing import measure  # noqa: E402

M, H, V = 2048, 4096, 128256


def _cublas(a, b, c, bias, accumulate):
    if accumulate:
        c.addmm_(a, b)
    else:
        torch.mm(a, b, out=c)


IMPLS = {"cute": lc.matmul, "triton": lt._matmul_triton, "cublas": _cublas}


def _sets() -> list[dict]:
    out = []
    for seed in range(2):
        g = torch.Generator(device="cuda").manual_seed(seed)
        out.append({"h": torch.randn(M, H, device="cuda", generator=g).to(torch.bfloat16),
                    "w": (torch.randn(V, H, device="cuda", generator=g) / H**0.5).to(torch.bfloat16),
                    "g": (torch.randn(M, V, device="cuda", generator=g) * 1e-3).to(torch.bfloat16)})
    return out


# product -> (a, b, c shape, accumulate) from one input set
PRODUCTS = {"logits": lambda s: (s["h"], s["w"].t(), (M, V), False),
            "dhidden": lambda s: (s["g"], s["w"], (M, H), False),
            "dweight": lambda s: (s["g"].t(), s["h"], (V, H), True)}


def _row(product: str, impl: str, fn, sets: list[dict]) -> dict:
    row = {"product": product, "impl": impl}
    try:
        a, b, shape, acc = PRODUCTS[product](sets[0])
        want = torch.zeros(shape, device="cuda", dtype=torch.bfloat16)
        got = torch.zeros(shape, device="cuda", dtype=torch.bfloat16)
        _cublas(a, b, want, None, acc)
        fn(a, b, got, None, acc)
        row["rel_err_vs_cublas"] = float((got.float() - want.float()).norm() / want.float().norm())
        outs = [torch.zeros(shape, device="cuda", dtype=torch.bfloat16) for _ in sets]
        calls = [lambda s=s, o=o: fn(*PRODUCTS[product](s)[:2], o, None, acc) for s, o in zip(sets, outs, strict=True)]
        t = measure(calls, warmup_ms=20.0, rep_ms=200.0, min_reps=10)
        row.update(median_ms=t.median_ms, iqr_ms=t.q3_ms - t.q1_ms,
                   tflop_per_s=2 * shape[0] * shape[1] * a.shape[1] / (t.median_ms * 1e-3) / 1e12)
    except Exception as e:  # noqa: BLE001 - a failing variant is a row
        row["error"] = f"{type(e).__name__}: {str(e)[:400]}"
    print(row, flush=True)
    return row


def main(argv: list[str]) -> int:
    sets = _sets()
    rows = [_row(p, name, fn, sets) for p in PRODUCTS for name, fn in IMPLS.items()]
    saved = (lc.GEMM_TILE, lc.GEMM_STAGES, lc.GROUP_M)
    for spec in argv:
        tm, tn, tk, stages, group = (int(x) for x in spec.split(","))
        lc.GEMM_TILE, lc.GEMM_STAGES, lc.GROUP_M = (tm, tn, tk), stages, group
        lc._CACHE.clear()
        rows.append({**_row("logits", "cute", lc.matmul, sets), "tile": [tm, tn, tk], "stages": stages, "group": group})
    lc.GEMM_TILE, lc.GEMM_STAGES, lc.GROUP_M = saved
    write_result("lce_gemm", {"method": METHOD, "shape": {"M": M, "H": H, "V": V}, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
