"""Probe (H200): how the CuTe DSL row kernels spread wide rows. The row engine's tiling puts a row on the
threads of one CTA up to MAX_CTA_THREADS_PER_ROW, then on a cluster of up to MAX_CLUSTER CTAs; this times
softmax, rms_norm and layer_norm forward and backward at 32K, 64K and 256K columns (2**27 bf16 elements a
width) under each (MAX_CTA_THREADS_PER_ROW, MAX_CLUSTER, MAX_THREADS) given, checking each result against
torch in fp32. Smaller CTAs fit more of them an SM (more rows in flight); clusters of 16 (non-portable on
sm_90) halve the CTA at 256K, and a CTA of at most 512 threads may hold 128 registers a thread (1024: 64).
Writes row_cluster.json to $OUT.

Run: source .carry/setup.sh && PYTHONPATH=$PWD python3 benchmarks/probes/row_cluster.py [THREADS,CLUSTER,MAX ...]
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from benchmarks.common import METHOD, write_result  # noqa: E402
from kernelagent.verifier.measure.timing import measure  # noqa: E402

WIDTHS = (32768, 65536, 262144)
ELEMENTS = 1 << 27
DT = torch.bfloat16


def _inputs(n: int, seed: int) -> dict:
    g = torch.Generator(device="cuda").manual_seed(seed)
    m = ELEMENTS // n
    return {"x": torch.randn(m, n, device="cuda", generator=g).to(DT),
            "dy": torch.randn(m, n, device="cuda", generator=g).to(DT),
            "w": (1 + 0.1 * torch.randn(n, device="cuda", generator=g)).to(DT),
            "b": (0.1 * torch.randn(n, device="cuda", generator=g)).to(DT)}


def _softmax(mod):
    def fwd(s):
        return mod.softmax_forward(s["x"])

    def bwd_args(s):
        return (mod.softmax_forward(s["x"]), s["dy"])

    def ref(s):
        x = s["x"].float().requires_grad_()
        y = torch.softmax(x, -1)
        (dx,) = torch.autograd.grad(y, x, s["dy"].float())
        return y, dx
    return fwd, lambda a: mod.softmax_backward(*a), bwd_args, ref


def _rms_norm(mod):
    def fwd(s):
        return mod.rms_norm_forward(s["x"], s["w"], 1e-6)[0]

    def bwd_args(s):
        return (s["x"], s["w"], s["dy"], mod.rms_norm_forward(s["x"], s["w"], 1e-6)[1])

    def ref(s):
        x = s["x"].float().requires_grad_()
        y = torch.nn.functional.rms_norm(x, x.shape[-1:], s["w"].float(), 1e-6)
        (dx,) = torch.autograd.grad(y, x, s["dy"].float())
        return y, dx
    return fwd, lambda a: mod.rms_norm_backward(*a)[0], bwd_args, ref


def _layer_norm(mod):
    def fwd(s):
        return mod.layer_norm_forward(s["x"], s["w"], s["b"], 1e-5)[0]

    def bwd_args(s):
        _, mean, rstd = mod.layer_norm_forward(s["x"], s["w"], s["b"], 1e-5)
        return (s["x"], s["w"], s["b"], s["dy"], mean, rstd)

    def ref(s):
        x = s["x"].float().requires_grad_()
        y = torch.nn.functional.layer_norm(x, x.shape[-1:], s["w"].float(), s["b"].float(), 1e-5)
        (dx,) = torch.autograd.grad(y, x, s["dy"].float())
        return y, dx
    return fwd, lambda a: mod.layer_norm_backward(*a)[0], bwd_args, ref


FAMILIES = {"softmax": _softmax, "rms_norm": _rms_norm, "layer_norm": _layer_norm}


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b).norm() / b.norm().clamp_min(1e-30))


def _rows(family: str, mod, setting: tuple[int, int], n: int, sets: list[dict]) -> list[dict]:
    fwd, bwd, bwd_args, ref = FAMILIES[family](mod)
    mod.MAX_CTA_THREADS_PER_ROW, mod.MAX_CLUSTER, mod.MAX_THREADS = setting
    # no width table: every width takes the module's defaults, the setting under test
    mod.FWD_SPREAD, mod.BWD_SPREAD = mod.Spread(mod.FWD_VALUES), mod.Spread(mod.BWD_VALUES)
    base = {"family": family, "n": n, "m": ELEMENTS // n, "threads": setting[0], "cluster_max": setting[1],
            "max_threads": setting[2]}
    out = []
    for mode in ("forward", "backward"):
        row = {**base, "mode": mode}
        try:
            t = mod.tiling_for([sets[0]["x"]], mod.FWD_VALUES if mode == "forward" else mod.BWD_VALUES)
            row.update(cta_threads=t.threads, cluster=t.cluster, values=t.vpt * t.vec)
            want = ref(sets[0])[0 if mode == "forward" else 1]
            got = fwd(sets[0]) if mode == "forward" else bwd(bwd_args(sets[0]))
            row["rel_err"] = _rel(got, want)
            if mode == "forward":
                calls = [lambda s=s: fwd(s) for s in sets]
            else:
                args = [bwd_args(s) for s in sets]
                calls = [lambda a=a: bwd(a) for a in args]
            timing = measure(calls, rep_ms=100.0, min_reps=10)
            moved = (2 if mode == "forward" else 3) * ELEMENTS * 2
            row.update(median_us=timing.median_ms * 1e3, tb_per_s=moved / (timing.median_ms * 1e-3) / 1e12)
        except Exception as e:  # noqa: BLE001 - a setting that fails is a row
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        print(row, flush=True)
        out.append(row)
    return out


def main(argv: list[str]) -> int:
    settings = ([tuple(int(v) for v in a.split(",")) for a in argv]
                or [(512, 8, 1024), (256, 8, 1024), (512, 16, 1024), (512, 16, 512), (256, 16, 512)])
    rows: list[dict] = []
    for family in FAMILIES:
        mod = importlib.import_module(f"kernelagent.kernels.{family}.cute")
        saved = (mod.MAX_CTA_THREADS_PER_ROW, mod.MAX_CLUSTER, mod.MAX_THREADS, mod.FWD_SPREAD, mod.BWD_SPREAD)
        try:
            for n in WIDTHS:
                sets = [_inputs(n, seed) for seed in range(2)]
                for setting in settings:
                    rows += _rows(family, mod, setting, n, sets)
                del sets
                torch.cuda.empty_cache()
        finally:
            mod.MAX_CTA_THREADS_PER_ROW, mod.MAX_CLUSTER, mod.MAX_THREADS, mod.FWD_SPREAD, mod.BWD_SPREAD = saved
    write_result("row_cluster", {"method": METHOD, "elements": ELEMENTS, "dtype": "bfloat16",
                                 "settings": [list(s) for s in settings], "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
