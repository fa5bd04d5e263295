"""Child process for test_cute_support: exercises kernelagent.verifier.cute.support the way the
verifier's worker does (hooks installed before any candidate is imported, CPU compile-only mode)
and prints one JSON object of what it saw. A separate process, because the hooks patch cutlass
classes for the life of the process.

Usage: python cute_child.py CANDIDATE.py [CANDIDATE.py ...]   (CPU; candidates whose forward fails)
       python cute_child.py --gpu                               (GPU: the examples' numerics)
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from collections import Counter
from pathlib import Path

from kernelagent.verifier.cute import support as cs

ROOT = Path(__file__).resolve().parents[3]


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def examples(stats: dict) -> dict:
    import torch

    out = {}
    softmax = load(ROOT / "examples/softmax/kernel_cute.py", "ex_softmax")
    rms = load(ROOT / "examples/rms_norm/kernel_cute.py", "ex_rms")
    cases = {
        "softmax_fp32": (softmax.ModelNew(), torch.randn(8, 1000)),
        "softmax_bf16_odd": (softmax.ModelNew(), torch.randn(2, 3, 513, dtype=torch.bfloat16)),
        "rms_bf16": (rms.ModelNew(5120), torch.randn(4, 5120, dtype=torch.bfloat16)),
    }
    for name, (model, x) in cases.items():
        before = stats["cute_launches_skipped"]
        t0 = time.perf_counter()
        y = model(x)
        out[name] = {"seconds": time.perf_counter() - t0, "shape_ok": tuple(y.shape) == tuple(x.shape),
                     "dtype_ok": y.dtype == x.dtype, "skipped": stats["cute_launches_skipped"] - before}
    return out


def cache(stats: dict) -> dict:
    import cutlass.cute as cute
    import torch
    from cutlass.cute.runtime import from_dlpack

    softmax = sys.modules["ex_softmax"]
    x, y = torch.randn(16, 2048), torch.empty(16, 2048)
    args = lambda a, b: (softmax._to_cute(a, 4), softmax._to_cute(b, 4), softmax._stream(a), 2048, 4, 128)  # noqa: E731
    hits0, misses0 = stats["cute_cache"]["hits"], stats["cute_cache"]["misses"]
    t0 = time.perf_counter()
    first = cute.compile(softmax._softmax, *args(x, y))
    t1 = time.perf_counter()
    second = cute.compile(softmax._softmax, *args(torch.randn(64, 2048), torch.empty(64, 2048)))
    t2 = time.perf_counter()
    other = cute.compile(softmax._softmax, *args(torch.randn(16, 1024), torch.empty(16, 1024)))
    return {"first_s": t1 - t0, "second_s": t2 - t1, "same_object": first is second, "other_is_new": other is not first,
            "hits": stats["cute_cache"]["hits"] - hits0, "misses": stats["cute_cache"]["misses"] - misses0,
            "static_key_differs": from_dlpack(x).__cache_key__ != from_dlpack(torch.randn(16, 1024)).__cache_key__}


def no_gpu_launch() -> dict:
    """Outside compile-only mode the launch really is attempted and fails in CUDA initialisation."""
    import torch

    softmax = sys.modules["ex_softmax"]
    x = torch.randn(4, 256)
    try:
        softmax.ModelNew()(x)
    except Exception as e:  # noqa: BLE001 - the point is to classify whatever it raises
        category, message = cs.classify_exception(e, "")
        return {"raised": type(e).__name__, "category": category, "message": message}
    return {"raised": None}


def failing(paths: list[str]) -> dict:
    import torch

    out = {}
    for i, path in enumerate(paths):
        try:
            load(Path(path), f"cand_{i}").ModelNew()(torch.randn(4, 128))
            out[path] = {"category": "none", "message": ""}
        except Exception as e:  # noqa: BLE001
            category, message = cs.classify_exception(e, path)
            out[path] = {"category": category, "message": message}
    return out


def gpu(stats: dict) -> dict:
    """On a GPU: both examples against float64 references (max error per case), launches counted."""
    import torch
    import torch.nn.functional as F

    softmax = load(ROOT / "examples/softmax/kernel_cute.py", "ex_softmax").ModelNew()
    rms_mod = load(ROOT / "examples/rms_norm/kernel_cute.py", "ex_rms")
    cases = []
    for dtype in (torch.float32, torch.bfloat16):
        for shape in ((1, 1000), (7, 1), (5, 1023), (5, 1025), (2, 3, 513), (2, 20000), (9, 300), (256, 8192)):
            x = torch.randn(*shape, device="cuda", dtype=dtype) * (80.0 if shape == (9, 300) else 1.0)
            cases.append(("softmax", softmax, x, lambda x: torch.softmax(x.double(), -1)))
        for hidden in (5120, 1000, 4096, 1):
            rms = rms_mod.ModelNew(hidden).cuda()
            with torch.no_grad():
                rms.weight.copy_(1.0 + 0.1 * torch.randn(hidden))
            x = torch.randn(7, hidden, device="cuda", dtype=dtype) * 3.0
            w = rms.weight.detach().double()
            cases.append(("rms_norm", rms, x, lambda x, w=w: F.rms_norm(x.double(), w.shape, w, 1e-6)))
    out = []
    for name, model, x, ref in cases:
        before = stats["cute_launches"]
        y = model(x)
        torch.cuda.synchronize()
        err = ((y.double() - ref(x)).abs().max() / ref(x).abs().max()).item()
        out.append({"op": name, "shape": list(x.shape), "dtype": str(x.dtype), "rel_err": err,
                    "launches": stats["cute_launches"] - before, "finite": bool(torch.isfinite(y).all())})
    return {"cases": out, "current_stream": torch.cuda.current_stream().cuda_stream}


def main() -> None:
    stats: dict = {}
    cs.install_hooks(stats)
    if sys.argv[1:] == ["--gpu"]:
        result = gpu(stats)
        result["stats"] = {k: dict(v) if isinstance(v, Counter) else v for k, v in stats.items()}
        print("JSON:" + json.dumps(result, default=str))
        return
    result: dict = {}
    with cs.compile_only_mode(stats):
        result["examples"] = examples(stats)
        result["outcome"] = list(cs.compile_only_outcome(stats))
        result["cache"] = cache(stats)
        result["failing"] = failing(sys.argv[1:])
    import torch

    if not torch.cuda.is_available():  # on a GPU the launch would run, on CPU pointers
        result["no_gpu_launch"] = no_gpu_launch()
    result["stats"] = {k: dict(v) if isinstance(v, Counter) else v for k, v in stats.items()}
    print("JSON:" + json.dumps(result, default=str))


if __name__ == "__main__":
    main()
