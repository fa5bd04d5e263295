"""Child process for test_rowwise_cute: compiles the row-wise CuTe DSL kernels for sm_90a without a GPU,
the way the verifier's worker does (its hooks installed, launches skipped), forward and backward,
and prints one JSON line: per case whether it compiled, per kernel the ptxas registers and spills,
and what the PTX holds (128-bit loads and stores, cluster barriers, st.async pushes, mbarrier waits,
DSMEM loads).

Usage: CUTE_DSL_KEEP=ptx CUTE_DSL_DUMP_DIR=DIR python cute_rowwise_child.py
"""

from __future__ import annotations

import importlib
import json
import os
import re
import traceback
from collections import Counter
from pathlib import Path

import torch

from kernelagent.verifier.cute import support as cs

BF16, F32, F16 = torch.bfloat16, torch.float32, torch.float16
# (family, shape, dtype, variant): multi-row CTAs with partial tiles, odd widths (scalar copies),
# clusters (the row split over 4, 8 or 16 CTAs: the spread tables), no weight / bias, the fused residual add.
CASES = [
    ("softmax", (37, 1000), BF16, ""),
    ("softmax", (2, 40000), F32, ""),
    ("log_softmax", (5, 1023), F16, ""),
    ("log_softmax", (2, 262144), BF16, ""),
    ("rms_norm", (37, 1000), BF16, "residual"),
    ("rms_norm", (2, 40000), F32, "no_weight"),
    ("rms_norm", (2, 262144), BF16, ""),
    ("layer_norm", (5, 1023), BF16, ""),
    ("layer_norm", (3, 40000), F32, "no_bias"),
]


def run_case(family: str, shape: tuple[int, ...], dtype: torch.dtype, variant: str) -> None:
    mod = importlib.import_module(f"kernelagent.kernels.{family}.cute")
    x = torch.randn(shape, dtype=dtype)
    n = shape[-1]
    w = None if variant == "no_weight" else torch.randn(n, dtype=dtype)
    if family in ("softmax", "log_softmax"):
        y = getattr(mod, f"{family}_forward")(x)
        getattr(mod, f"{family}_backward")(y, torch.randn_like(y))
    elif family == "rms_norm":
        r = torch.randn_like(x) if variant == "residual" else None
        y, rstd, s = mod.rms_norm_forward(x, w, 1e-6, r)
        mod.rms_norm_backward(s if s is not None else x, w, torch.randn_like(y), rstd,
                              torch.randn_like(y) if r is not None else None)
    else:
        b = None if variant == "no_bias" else torch.randn(n, dtype=dtype)
        y, mean, rstd = mod.layer_norm_forward(x, w, b, 1e-5)
        mod.layer_norm_backward(x, w, b, torch.randn_like(y), mean, rstd)


def ptx_facts(folder: Path) -> dict[str, dict[str, int]]:
    out = {}
    for path in sorted(folder.glob("*.ptx")):
        text = path.read_text(errors="replace")
        out[path.name] = {"ld_v4": len(re.findall(r"ld\.global(?:\.\w+)*\.v4", text)),
                          "st_v4": len(re.findall(r"st\.global(?:\.\w+)*\.v4", text)),
                          "cluster_barrier": text.count("barrier.cluster.arrive"),
                          "st_async": text.count("st.async.shared::cluster.mbarrier::complete_tx"),
                          "mbarrier_wait": text.count("mbarrier.try_wait.parity"),
                          "dsmem_load": text.count("ld.shared::cluster")}
    return out


def main() -> None:
    stats: dict = {}
    cs.install_hooks(stats)
    cases = []
    with cs.compile_only_mode(stats):
        for family, shape, dtype, variant in CASES:
            before = stats["cute_launches_skipped"]
            try:
                run_case(family, shape, dtype, variant)
                error = None
            except Exception as e:  # noqa: BLE001 - reported per case, the test names it
                error = f"{type(e).__name__}: {cs.clean_error(str(e))[:1500]}\n{traceback.format_exc()[-1500:]}"
            cases.append({"family": family, "shape": list(shape), "dtype": str(dtype), "variant": variant,
                          "error": error, "launches": stats["cute_launches_skipped"] - before})
    compiles = [{k: c.get(k) for k in ("kernel", "registers", "spills", "stack_bytes")}
                for c in stats.get("cute_compiles", [])]
    skipped = {k: v for k, v in Counter(stats.get("cute_kernels_skipped", {})).items()}
    dump = Path(os.environ.get("CUTE_DSL_DUMP_DIR", "."))
    print("JSON:" + json.dumps({"cases": cases, "compiles": compiles, "skipped": skipped, "ptx": ptx_facts(dump)}))


if __name__ == "__main__":
    main()
