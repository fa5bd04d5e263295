"""Child process for test_guides: runs the guides' snippet files and prints one JSON line.

    python guide_child.py cute FILE...          import, run `# check:` lines with the verifier's CuTe
                                                hooks (compile-only for sm_90a without a GPU; with a
                                                GPU the kernels run and `# gpu-check:` lines too)
    python guide_child.py triton-interp FILE... the same under TRITON_INTERPRET=1, recording each
                                                launch with the JIT's own argument specialisation
    python guide_child.py triton-aot LAUNCHES   compile each recorded launch, and every config of an
                                                autotuned kernel, for sm_90 (no GPU needed)
    python guide_child.py triton-gpu FILE...    on a GPU: run the `# check:` lines on CUDA tensors

One process per mode: the interpreter switch must be set before triton is imported, and the CuTe
hooks patch cutlass for the life of the process.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import traceback
from pathlib import Path
from typing import Any


def load(path: str) -> Any:
    name = Path(path).stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run_checks(path: str, tags: tuple[str, ...]) -> str | None:
    """Import the file and run its check lines; the first failure as text, else None."""
    source = Path(path).read_text()
    try:
        module = load(path)
        for tag in tags:
            for stmt in re.findall(rf"^# {tag}: (.*)$", source, re.M):
                exec(stmt, vars(module))  # noqa: S102 - the guide's own check lines
    except Exception as e:  # noqa: BLE001 - reported to the test, which fails on it
        return f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}"
    return None


# ----------------------------------------------------------------------------- CuTe DSL


def cute(paths: list[str]) -> dict:
    import torch

    from kernelagent.verifier.cute import support as cs

    stats: dict = {}
    cs.install_hooks(stats)
    gpu = torch.cuda.is_available()
    if gpu:
        torch.set_default_device("cuda")  # the check lines make their tensors with torch.randn
    out = {}
    for path in paths:
        n0, s0, l0 = len(stats["cute_compiles"]), stats["cute_launches_skipped"], stats["cute_launches"]
        if gpu:
            error = run_checks(path, ("check", "gpu-check"))
        else:
            with cs.compile_only_mode(stats):
                error = run_checks(path, ("check",))
        out[path] = {"error": error, "compiles": stats["cute_compiles"][n0:],
                     "skipped": stats["cute_launches_skipped"] - s0, "launched": stats["cute_launches"] - l0}
    return {"gpu": gpu, "files": out}


# ----------------------------------------------------------------------------- Triton


def triton_interp(paths: list[str]) -> dict:
    os.environ["TRITON_INTERPRET"] = "1"
    import torch
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.interpreter import InterpretedFunction

    launches: list[dict] = []
    original = InterpretedFunction.run

    def spec(value: Any) -> list:
        """[type, specialisation, value] as the GPU JIT would see the argument ('D': 16-divisible)."""
        if isinstance(value, torch.Tensor):
            return [*native_specialize_impl(CUDABackend, value, False, True, True), None]
        if isinstance(value, (bool, int, float)):
            return [*native_specialize_impl(CUDABackend, value, False, True, True), value]
        return ["constexpr", None, value if isinstance(value, (str, type(None))) else repr(value)]

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        if not warmup:
            values = dict(zip(self.arg_names, args, strict=False))
            values.update({k: v for k, v in kwargs.items() if k in self.arg_names})
            options = {k: kwargs[k] for k in ("num_warps", "num_stages") if kwargs.get(k) is not None}
            launches.append({"file": self.fn.__code__.co_filename, "kernel": self.fn.__name__,
                             "args": {k: spec(v) for k, v in values.items()}, "options": options})
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    InterpretedFunction.run = run
    # Autotuning benchmarks need a GPU: pretend every config ties, so the first one runs.
    Autotuner.do_bench = property(lambda self: lambda fn, quantiles=None, **kw: [0.0, 0.0, 0.0])
    out = {}
    for path in paths:
        n0 = len(launches)
        out[path] = {"error": run_checks(path, ("check",)), "launches": launches[n0:]}
    return {"files": out}


def triton_gpu(paths: list[str]) -> dict:
    """On a GPU: the same checks, run by the compiled kernels on CUDA tensors."""
    import torch

    torch.set_default_device("cuda")
    return {"files": {path: {"error": run_checks(path, ("check",))} for path in paths}}


def triton_aot(launch_file: str) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.compiler import ASTSource

    files = json.loads(Path(launch_file).read_text())["files"]
    out = {}
    for path, result in files.items():
        module = load(path)
        compiled, seen = [], set()
        for launch in result["launches"]:
            for req in _with_autotune_configs(module, launch):
                key = json.dumps(req, sort_keys=True, default=str)
                if key in seen:
                    continue
                seen.add(key)
                compiled.append(_compile(triton, ASTSource, GPUTarget, CUDABackend, module, req))
        out[path] = compiled
    return {"files": out}


def _with_autotune_configs(module: Any, launch: dict) -> list[dict]:
    obj = getattr(module, launch["kernel"])
    configs = getattr(obj, "configs", None)
    if not configs:
        return [launch]
    reqs = []
    for cfg in configs:
        req = json.loads(json.dumps(launch, default=str))
        req["args"].update({k: ["constexpr", None, v] for k, v in cfg.kwargs.items()})
        req["options"] = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
        reqs.append(req)
    return reqs


def _compile(triton: Any, ast_source: Any, gpu_target: Any, backend: Any, module: Any, req: dict) -> dict:
    fn = getattr(module, req["kernel"])
    while not hasattr(fn, "params"):  # autotune / heuristics wrappers
        fn = fn.fn
    signature, constexprs, attrs = {}, {}, {}
    for i, p in enumerate(fn.params):
        if p.name not in req["args"]:
            continue
        kind, attr, value = req["args"][p.name]
        if p.is_constexpr or kind == "constexpr":
            signature[p.name], constexprs[p.name] = "constexpr", value
        else:
            signature[p.name] = kind
            if attr:
                attrs[(i,)] = backend.parse_attr(attr)
    facts: dict[str, Any] = {"kernel": req["kernel"], "options": req["options"],
                             "pointers": [v for v in signature.values() if v.startswith("*")],
                             "constexprs": {k: v for k, v in constexprs.items() if not isinstance(v, str)}}
    try:
        ck = triton.compile(ast_source(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs),
                            target=gpu_target("cuda", 90, 32), options=req["options"])
    except Exception as e:  # noqa: BLE001 - reported to the test, which fails on it
        facts["error"] = f"{type(e).__name__}: {e}"[:1500]
        return facts
    ptx = ck.asm["ptx"]
    facts.update({"target": (re.findall(r"\.target (\w+)", ptx) or ["?"])[0], "shared": ck.metadata.shared,
                  "wgmma": "wgmma.mma_async" in ptx, **_ptxas(triton, ptx)})
    return facts


def _ptxas(triton: Any, ptx: str) -> dict:
    import subprocess
    import tempfile

    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "k.ptx").write_text(ptx)
        log = subprocess.run([str(ptxas), "-v", "-arch=sm_90a", f"{d}/k.ptx", "-o", f"{d}/k.cubin"],
                             capture_output=True, text=True, timeout=300).stderr
    regs = re.findall(r"Used (\d+) registers", log)
    spills = re.findall(r"(\d+) bytes spill stores", log)
    return {"registers": int(regs[0]) if regs else None, "spill_stores": int(spills[0]) if spills else None}


def main() -> None:
    mode, rest = sys.argv[1], sys.argv[2:]
    runners = {"cute": cute, "triton-interp": triton_interp, "triton-gpu": triton_gpu,
               "triton-aot": lambda r: triton_aot(r[0])}
    result = runners[mode](rest)
    print("JSON:" + json.dumps(result, default=str))


if __name__ == "__main__":
    main()
