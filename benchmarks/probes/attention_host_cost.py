"""Probe (H200): what a call of attention costs the host, beside what it costs the GPU, at a short sequence
(B=32 H=16 S=512 D=128 bf16, where the sweep of 2026-12-04 put the CuTe DSL forward at 174 TFLOP/s against
FA4's 454) and at the headline shape (B=2 H=16 S=8192).

Per implementation (ours: Triton, CuTe DSL; peers: FA4, cuDNN SDPA): host microseconds a call (N calls
issued back to back with no synchronisation, after warm-up; the GPU drains after) and do_bench's median;
for the CuTe forward also its parts: building the kernel's arguments (base pointers and sizes; the DLPack
tensors it passes strided inputs, for comparison), the compiled kernel's call alone, and the whole forward on
dense and on strided q, k, v; and where the CuTe op's host time goes (cProfile of the
forward and of forward+backward at the short shape: the functions of most own time). Writes
attention_host_cost.json ($OUT or benchmarks/results).

  source .carry/setup.sh && PYTHONPATH=$PWD python3 benchmarks/probes/attention_host_cost.py

With KA_PROBE_FORWARD=1 it stops after the forwards (attention_host_cost_forward.json). With KA_PROBE_CAUSAL=1
it times only the forwards at S = 512 and 1024, causal and not, adding the GPU's kernel
time a call (torch profiler): attention_host_cost_causal.json.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from benchmarks.common import median_ms, write_result  # noqa: E402

SHAPES = [(32, 512, 16, 128), (2, 8192, 16, 128)]
CALLS = 200


def host_us(call, calls: int = CALLS) -> float:
    """Host microseconds a call: `calls` calls back to back, timed on the host, then one synchronisation."""
    for _ in range(10):
        call()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    host = time.perf_counter() - start
    torch.cuda.synchronize()
    return host / calls * 1e6


def _impls(q, k, v, causal: bool = False):
    from kernelagent.kernels.attention import cute as ac
    from kernelagent.kernels.attention import triton as tri
    out = {"triton": lambda: tri.attention(q, k, v, causal=causal),
           "cute": lambda: ac.attention(q, k, v, causal=causal)}
    try:
        from flash_attn.cute import flash_attn_func
        out["fa4"] = lambda: flash_attn_func(q, k, v, causal=causal)
    except ImportError:
        pass
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))

    def cudnn():
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    out["cudnn"] = cudnn
    return out


def _cute_parts(q, k, v) -> dict:
    """The CuTe forward's host work in parts: its arguments built (base pointers and sizes, as it passes dense
    tensors since the twentieth session, and the DLPack tensors it passes others), then the compiled kernel
    called alone."""
    from kernelagent.kernels.attention import cute as ac
    ac.attention_forward(q, k, v, q.shape[-1] ** -0.5, None, (None, None))
    b, s, h, d = q.shape
    out, lse, stats = torch.empty_like(q), *(torch.empty(n, dtype=torch.float32, device=q.device)
                                              for n in ((b, h, s), (2, b, h, s)))
    scalars = [ac.Float32(1.0), ac.Float32(1.0), ac.Float32(1.0), ac.Int32(0), ac.Int32(0)]

    def args():
        return [ac._ptr(q), ac._ptr(k), ac._ptr(v), ac._ptr(out), ac._ptr(lse, 4), ac._ptr(stats, 4), ac.Int32(b),
                ac.Int32(s), ac.Int32(k.shape[1]), ac.Int32(h), ac.Int32(k.shape[2]), *scalars]

    def dlpack_args():
        return [ac._to_cute(q), ac._to_cute(k), ac._to_cute(v), ac._to_cute(out), ac._to_cute(lse, 4),
                ac._to_cute(stats[0], 4), ac._to_cute(stats[1], 4), *scalars]
    compiled = next(c for key, c in ac._CACHE.items() if key[0] == q.dtype and key[1] == d and key[-1])
    built, stream = args(), ac._stream(q)
    strided = [torch.empty(b, t.shape[1], 2 * t.shape[2], d, dtype=t.dtype, device=t.device)[:, :, :t.shape[2]]
               for t in (q, k, v)]
    for src, dst in zip((q, k, v), strided, strict=True):
        dst.copy_(src)
    return {"arguments_us": host_us(args), "dlpack_arguments_us": host_us(dlpack_args),
            "compiled_call_us": host_us(lambda: compiled(*built, stream)),
            "attention_forward_us": host_us(lambda: ac.attention_forward(q, k, v, 0.1, None, (None, None))),
            "attention_forward_strided_us": host_us(
                lambda: ac.attention_forward(*strided, 0.1, None, (None, None)))}


def _shape(b: int, s: int, h: int, d: int) -> dict:
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(b, s, h, d, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    row: dict = {"b": b, "s": s, "h": h, "d": d, "impls": {}}
    for name, call in _impls(q, k, v).items():
        try:
            row["impls"][name] = {"host_us": host_us(call), "do_bench_ms": median_ms(call)}
        except Exception as e:  # noqa: BLE001 - a peer that fails is a note
            row["impls"][name] = f"{type(e).__name__}: {str(e)[:300]}"
    row["cute_parts"] = _cute_parts(q, k, v)
    return row


def _profile(call, calls: int = 100, top: int = 30) -> str:
    """cProfile of `calls` calls after warm-up: the `top` functions by own time, as pstats prints them."""
    for _ in range(10):
        call()
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        call()
    prof.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(top)
    return text.getvalue()


def _profiles() -> dict:
    """The CuTe op at the short shape: the forward, and forward+backward, profiled on the host."""
    from kernelagent.kernels.attention import cute as ac
    b, s, h, d = SHAPES[0]
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(b, s, h, d, generator=gen, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    do = torch.randn_like(q)

    def fwd_bwd():
        ac.attention(q, k, v).backward(do)
    with torch.no_grad():
        forward = _profile(lambda: ac.attention(q, k, v))
    return {"forward": forward, "forward_backward_us": host_us(fwd_bwd), "forward_backward": _profile(fwd_bwd)}


def _backward_parts() -> dict:
    """The CuTe op's host time at the short shape by path and by part: forward and forward+backward through
    the custom op, through `attention` (in eager mode on the GPU: _EagerAttention since the seventeenth
    session, no op dispatcher; the op before) and through the autograd.Function ModelNew uses; the
    backward called directly, and its parts (statistics table, dQ buffers, fused kernel with its arguments,
    the rest: the dQ post-pass and the checks)."""
    from kernelagent.kernels.attention import cute as ac
    b, s, h, d = SHAPES[0]
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = (torch.randn(b, s, h, d, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    scale, window = d ** -0.5, (None, None)
    out, _, stats = ac.attention_forward(q, k, v, scale, None, window)
    tab = ac._stats_table(do, out, stats, None)
    dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
    acc, rs, best = ac.fused_buffers(q, tab)

    def op_fwd_bwd():
        ac.attention_cute_fwd(*leaves, scale, None, None, None)[0].backward(do)

    def attention_fwd_bwd():
        ac.attention(*leaves).backward(do)

    def function_fwd_bwd():
        ac._AttentionFunction.apply(*leaves, scale, None, window).backward(do)
    with torch.no_grad():
        parts = {"op_forward_us": host_us(lambda: ac.attention_cute_fwd(q, k, v, scale, None, None, None)),
                 "attention_forward_us": host_us(lambda: ac.attention(q, k, v)),
                 "function_forward_us": host_us(lambda: ac._AttentionFunction.apply(q, k, v, scale, None, window))}
    parts.update({
        "op_forward_backward_us": host_us(op_fwd_bwd), "attention_forward_backward_us": host_us(attention_fwd_bwd),
        "function_forward_backward_us": host_us(function_fwd_bwd),
        "attention_backward_us": host_us(lambda: ac.attention_backward(do, q, k, v, out, stats, None, scale, None,
                                                                       window)),
        "stats_table_us": host_us(lambda: ac._stats_table(do, out, stats, None)),
        "fused_buffers_us": host_us(lambda: ac.fused_buffers(q, tab)),
        "fused_kernel_us": host_us(lambda: ac.fused_kernel(q, k, v, do, tab, dk, dv, acc, rs, best, scale, window)),
        "fused_backward_us": host_us(lambda: ac.fused_backward(q, k, v, do, tab, dq, dk, dv, scale, window))})
    return parts


def _device_us(call, calls: int = 20) -> float:
    """GPU microseconds a call: the kernels' durations the torch profiler records over `calls` calls."""
    from torch.profiler import ProfilerActivity, profile
    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type.name == "CUDA"]
    return sum(e.device_time for e in kernels) / calls


def _causal_rows() -> list:
    """KA_PROBE_CAUSAL=1: the forward at short sequences, causal and not (the sweep of 2026-12-04 timed the CuTe
    one slower causal than not there): host microseconds a call, do_bench's median and the GPU's kernel time."""
    rows = []
    for b, s in ((32, 512), (16, 1024)):
        gen = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(b, s, 16, 128, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        for causal in (False, True):
            row: dict = {"b": b, "s": s, "h": 16, "d": 128, "causal": causal, "impls": {}}
            for name, call in _impls(q, k, v, causal).items():
                if name == "cudnn":  # the rows of attention_host_cost_causal.json: ours and FA4
                    continue
                try:
                    row["impls"][name] = {"host_us": host_us(call), "do_bench_ms": median_ms(call),
                                          "device_us": _device_us(call)}
                except Exception as e:  # noqa: BLE001 - a peer that fails is a note
                    row["impls"][name] = f"{type(e).__name__}: {str(e)[:300]}"
            print(row, flush=True)
            rows.append(row)
    return rows


def main() -> int:
    if os.environ.get("KA_PROBE_CAUSAL"):
        write_result("attention_host_cost_causal", {"calls": CALLS, "rows": _causal_rows()})
        return 0
    rows = []
    forward_only = bool(os.environ.get("KA_PROBE_FORWARD"))
    for shape in SHAPES:
        rows.append(_shape(*shape))
        print(rows[-1], flush=True)
        write_result("attention_host_cost" + ("_forward" if forward_only else ""), {"calls": CALLS, "rows": rows})
    if forward_only:
        return 0
    parts = _backward_parts()
    print(parts, flush=True)
    write_result("attention_host_cost", {"calls": CALLS, "rows": rows, "cute_paths_and_parts": parts})
    profiles = _profiles()
    print(profiles["forward"][:6000], profiles["forward_backward"][:6000], sep="\n", flush=True)
    write_result("attention_host_cost", {"calls": CALLS, "rows": rows, "cute_paths_and_parts": parts,
                                         "cute_profiles": profiles})
    return 0


if __name__ == "__main__":
    sys.exit(main())
