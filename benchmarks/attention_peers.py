"""Attention against its peers on the H200: TFLOP/s of the forward and of forward+backward, JSON + PNG.

Implementations (each skipped, with the reason, when it does not import or run):
  triton      kernelagent.kernels.attention.triton.attention
  cute        kernelagent.kernels.attention.cute.attention (CuTe DSL forward and backward)
  fa4         FlashAttention-4's CuTe DSL kernels (flash_attn.cute.flash_attn_func, from .carry)
  cudnn       F.scaled_dot_product_attention under SDPBackend.CUDNN_ATTENTION
  sdpa-flash  F.scaled_dot_product_attention under SDPBackend.FLASH_ATTENTION (FA2)
  tutorial    a minimal Triton FA2 forward written here after the Triton tutorial's algorithm
              (block pointers, causal split into off-diagonal and diagonal loops; forward only)
Shapes: the headline B=2 H=16 S=8192 D=128 bf16, then a sweep S = 512 ... 16384 at 16k tokens
(B = 16384 / S) with hidden size 2048 (D=128: 16 heads; D=64: 32 heads), causal and not.
FLOPs (FlashAttention's convention): forward 4 B H Sq Sk D, halved when causal; forward+backward
3.5x the forward (the backward does 2.5x the forward's matmul work).
Timing: triton.testing.do_bench median (L2 flushed before every call); outputs checked against
SDPA before timing. Results are written after every shape, so a run cut short keeps what it measured.

Run (H200):  source .carry/setup.sh && python3 benchmarks/attention_peers.py --out $OUT
             -> $OUT/attention_peers.{json,png}
             ... --quick (headline shape only) | --tune (every autotune config of ours, headline shape)
Run (here):  python3 benchmarks/attention_peers.py --plot RESULTS.json           redraws the PNG
             python3 benchmarks/attention_peers.py --cards RESULTS.json          fills the card's Measured block
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: the package and benchmarks.common from the checkout
    sys.path.insert(0, str(ROOT))

IMPLS = ("triton", "cute", "fa4", "cudnn", "sdpa-flash", "tutorial")
HEADLINE = (2, 8192, 16, 128)  # (B, S, H, D)
SWEEP_S = (512, 1024, 2048, 4096, 8192, 16384)
TOKENS, HIDDEN = 16384, 2048
TARGETS = {"triton": {"fwd": 560, "fwd+bwd": 450, "fwd causal": 500},
           "cute": {"fwd": 700, "fwd+bwd": 670, "fwd causal": 640}}
METHOD = "median of triton.testing.do_bench (warmup 25 ms, rep 100 ms, L2 flushed before every call)"


def flops(b: int, s: int, h: int, d: int, causal: bool, mode: str) -> float:
    fwd = 4.0 * b * h * s * s * d / (2 if causal else 1)
    return fwd * (3.5 if mode == "fwd+bwd" else 1.0)


# ------------------------------------------------------------------------------ implementations


def _ours(name: str) -> Callable:
    mod = importlib.import_module(f"kernelagent.kernels.attention.{name}")
    return lambda q, k, v, causal: mod.attention(q, k, v, causal=causal)


def _fa4() -> Callable:
    from flash_attn.cute import flash_attn_func

    def call(q, k, v, causal):
        out = flash_attn_func(q, k, v, causal=causal)
        return out[0] if isinstance(out, tuple) else out
    return call


def _sdpa(backend_name: str) -> Callable:
    import torch.nn.functional as F  # noqa: N812
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = getattr(SDPBackend, backend_name)

    def call(q, k, v, causal):  # (B, S, H, D) storage, as the models that call SDPA hold it
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=causal).transpose(1, 2)
    return call


def _tutorial() -> Callable:
    import torch

    def call(q, k, v, causal):
        b, s, h, d = q.shape
        o = torch.empty_like(q)

        def grid(meta):
            return (triton.cdiv(s, meta["BLOCK_M"]), b * h)
        _TUTORIAL[grid](q, k, v, o, q.stride(0), q.stride(1), q.stride(2), s, h, d ** -0.5 * 1.4426950408889634,
                        HEAD=d, CAUSAL=causal)
        return o
    return call


# The Triton tutorial's FA2 forward, re-written small: block pointers (no TMA descriptors), K read
# transposed, the causal case split into an unmasked loop below the diagonal and a masked diagonal
# block. Needs S a multiple of BLOCK_M (the benchmark's lengths are powers of two).
@triton.jit
def _tutorial_fwd(Q, K, V, Out, stride_b, stride_s, stride_h, seqlen, n_heads, scale_log2, HEAD: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    base = (bh // n_heads).to(tl.int64) * stride_b + (bh % n_heads) * stride_h
    q_ptr = tl.make_block_ptr(Q + base, (seqlen, HEAD), (stride_s, 1), (start_m * BLOCK_M, 0), (BLOCK_M, HEAD), (1, 0))
    k_ptr = tl.make_block_ptr(K + base, (HEAD, seqlen), (1, stride_s), (0, 0), (HEAD, BLOCK_N), (0, 1))
    v_ptr = tl.make_block_ptr(V + base, (seqlen, HEAD), (stride_s, 1), (0, 0), (BLOCK_N, HEAD), (1, 0))
    q = tl.load(q_ptr)
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD], tl.float32)
    diag = start_m * BLOCK_M if CAUSAL else seqlen
    for start_n in range(0, diag, BLOCK_N):  # no mask
        s = tl.dot(q, tl.load(tl.advance(k_ptr, (0, start_n)))) * scale_log2
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(tl.bfloat16), tl.load(tl.advance(v_ptr, (start_n, 0))), acc * alpha[:, None])
        m_i = m_new
    if CAUSAL:  # the diagonal block, masked
        for start_n in range(diag, diag + BLOCK_M, BLOCK_N):
            s = tl.dot(q, tl.load(tl.advance(k_ptr, (0, start_n)))) * scale_log2
            s = tl.where(rows[:, None] >= start_n + tl.arange(0, BLOCK_N)[None, :], s, -float("inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.math.exp2(s - m_new[:, None])
            alpha = tl.math.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = tl.dot(p.to(tl.bfloat16), tl.load(tl.advance(v_ptr, (start_n, 0))), acc * alpha[:, None])
            m_i = m_new
    o_ptr = tl.make_block_ptr(Out + base, (seqlen, HEAD), (stride_s, 1), (start_m * BLOCK_M, 0), (BLOCK_M, HEAD),
                              (1, 0))
    tl.store(o_ptr, (acc / l_i[:, None]).to(tl.bfloat16))


_TUTORIAL = triton.autotune(
    [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=st)
     for bm, bn, w, st in ((128, 64, 8, 3), (128, 64, 4, 3), (64, 64, 4, 3))],
    key=["seqlen", "HEAD", "CAUSAL"])(_tutorial_fwd)


def implementations(names: tuple[str, ...]) -> dict[str, Callable | str]:
    """name -> callable(q, k, v, causal) on (B, S, H, D), or the reason it is missing."""
    makers = {"triton": lambda: _ours("triton"), "cute": lambda: _ours("cute"), "fa4": _fa4,
              "cudnn": lambda: _sdpa("CUDNN_ATTENTION"), "sdpa-flash": lambda: _sdpa("FLASH_ATTENTION"),
              "tutorial": _tutorial}
    out: dict[str, Callable | str] = {}
    for name in names:
        try:
            out[name] = makers[name]()
        except Exception as e:  # noqa: BLE001 - a missing peer is reported, not fatal
            out[name] = f"not importable: {type(e).__name__}: {str(e)[:200]}"
    return out


# ------------------------------------------------------------------------------------- measuring


def _inputs(b: int, s: int, h: int, d: int, grad: bool):
    import torch
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(b, s, h, d, generator=gen, device="cuda", dtype=torch.bfloat16).requires_grad_(grad)
               for _ in range(3))
    return q, k, v


def _check(fn: Callable, b: int, s: int, h: int, d: int, causal: bool) -> float:
    """Relative L2 error of fn's output against SDPA (flash) on one input set."""
    q, k, v = _inputs(b, s, h, d, False)
    want = _sdpa("FLASH_ATTENTION")(q, k, v, causal).float()
    got = fn(q, k, v, causal).float()
    return float((got - want).norm() / want.norm())


def _time(fn: Callable, b: int, s: int, h: int, d: int, causal: bool, mode: str) -> float:
    import torch
    import triton

    q, k, v = _inputs(b, s, h, d, mode == "fwd+bwd")
    if mode == "fwd":
        def call():
            fn(q, k, v, causal)
    else:
        dout = torch.randn_like(q)

        def call():
            torch.autograd.grad(fn(q, k, v, causal), (q, k, v), dout)
    call()  # compile / autotune outside the timing
    torch.cuda.synchronize()
    return float(triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median"))


def measure_shape(impls: dict, b: int, s: int, h: int, d: int, causal: bool, modes: tuple[str, ...]) -> list[dict]:
    rows = []
    for name, fn in impls.items():
        for mode in modes:
            row = {"impl": name, "b": b, "s": s, "h": h, "d": d, "causal": causal, "mode": mode}
            if isinstance(fn, str):
                row["error"] = fn
            elif name == "tutorial" and mode != "fwd":
                continue
            else:
                try:
                    if mode == "fwd":
                        row["rel_err_vs_sdpa"] = _check(fn, b, min(s, 4096), h, d, causal)
                    ms = _time(fn, b, s, h, d, causal, mode)
                    row.update(median_ms=ms, tflops=flops(b, s, h, d, causal, mode) / (ms * 1e-3) / 1e12)
                except Exception as e:  # noqa: BLE001 - one failing impl must not stop the run
                    row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                    traceback.print_exc()
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


# ------------------------------------------------------------------------------------------ runs


def _out_dir(arg: str) -> Path:
    from benchmarks.common import out_dir
    return Path(arg) if arg else out_dir()


def _write(rows: list[dict], out: Path, started: float) -> dict:
    from benchmarks.common import environment
    result = {"benchmark": "attention_peers", "environment": environment(), "method": METHOD,
              "flops": "forward 4*B*H*Sq*Sk*D (halved when causal); forward+backward 3.5x the forward",
              "targets_tflops": TARGETS, "seconds": round(time.time() - started, 1), "rows": rows}
    out.mkdir(parents=True, exist_ok=True)
    (out / "attention_peers.json").write_text(json.dumps(result, indent=2, default=str))
    return result


def shapes(quick: bool) -> list[tuple[int, int, int, int, bool]]:
    """(B, S, H, D, causal): the headline first, then the sweep (short sequences first)."""
    out = [(*HEADLINE, False), (*HEADLINE, True)]
    if not quick:
        for d in (128, 64):
            for s in SWEEP_S:
                for causal in (False, True):
                    shape = (TOKENS // s, s, HIDDEN // d, d, causal)
                    if shape not in out:
                        out.append(shape)
    return out


def run(args: argparse.Namespace) -> dict:
    started = time.time()
    impls = implementations(tuple(args.impls.split(",")))
    out = _out_dir(args.out_dir)
    rows: list[dict] = []
    result: dict = {}
    for b, s, h, d, causal in shapes(args.quick):
        if time.time() - started > args.budget:
            rows.append({"skipped": f"budget of {args.budget:.0f} s spent", "b": b, "s": s, "d": d, "causal": causal})
            continue
        rows += measure_shape(impls, b, s, h, d, causal, ("fwd", "fwd+bwd"))
        result = _write(rows, out, started)
    plot(result, out / "attention_peers.png")
    print(f"wrote {out / 'attention_peers.json'} and {out / 'attention_peers.png'}")
    return result


def tune(args: argparse.Namespace) -> None:
    """Every autotune config of ours on the headline shape (causal and not), printed best first."""
    import torch

    from kernelagent.kernels.attention import triton as tri
    for causal in (False, True):
        q, k, v = _inputs(*HEADLINE, True)
        out = tri.attention(q, k, v, causal=causal)
        torch.autograd.grad(out, (q, k, v), out.detach())
        for kernel in (tri._FWD, tri._DKDV, tri._DQ):
            timings = sorted((t[0] if isinstance(t, list) else t, str(c)) for c, t in kernel.configs_timings.items())
            print(json.dumps({"causal": causal, "kernel": kernel.base_fn.__name__, "best_first": timings}), flush=True)


# ------------------------------------------------------------------------------------------ cards

OURS = ("triton", "cute")
CARD = ROOT / "kernelagent" / "kernels" / "attention"
_MODES = {"fwd": "forward", "fwd+bwd": "forward+backward"}


def card_rows(data: dict, family: str, source: str) -> list[dict]:
    """The card's `measured` rows: the headline shape, causal and not, forward and forward+backward, our
    backends and every peer of the same run (TFLOP/s and ms), with the issue's targets."""
    if family != "attention":
        return []
    env, out = data["environment"], []
    sweep = any((r["b"], r["s"], r["h"], r["d"]) != HEADLINE for r in data["rows"])
    for causal in (False, True):
        for mode in ("fwd", "fwd+bwd"):
            got = {r["impl"]: r for r in data["rows"] if "tflops" in r and r["causal"] == causal
                   and r["mode"] == mode and (r["b"], r["s"], r["h"], r["d"]) == HEADLINE}
            if not any(n in got for n in OURS):
                continue
            key = f"{mode} causal" if causal else mode
            # TFLOP/s kept to 2 decimals, so the card table's integers are rounded once
            out.append({"date": env["date"], "gpu": env["gpu"], "torch": env["torch"], "triton": env["triton"],
                        "cutlass_dsl": env.get("cutlass_dsl"), "shape": "q, k, v (2, 8192, 16, 128) bf16, (B, S, H, D)",
                        "causal": causal, "mode": _MODES[mode],
                        "tflops": {n: round(got[n]["tflops"], 4) for n in OURS if n in got},
                        "median_ms": {n: round(got[n]["median_ms"], 4) for n in OURS if n in got},
                        "peers_tflops": {n: round(r["tflops"], 4) for n, r in got.items() if n not in OURS},
                        "peers_ms": {n: round(r["median_ms"], 4) for n, r in got.items() if n not in OURS},
                        "targets_tflops": {n: TARGETS[n].get(key) for n in OURS},
                        "method": data["method"], "source": source, "sweep": sweep})
    return out


def card_markdown(rows: list[dict]) -> str:
    """The card.md block for those rows: one table in TFLOP/s, ours against the same run's peers."""
    peers = [n for n in IMPLS if n not in OURS and any(n in r["peers_tflops"] for r in rows)]
    names = {"triton": "Triton", "cute": "CuTe DSL", "fa4": "FA4", "cudnn": "cuDNN", "sdpa-flash": "SDPA flash",
             "tutorial": "Triton tutorial"}
    from benchmarks.common import BEGIN, END

    lines = [BEGIN, "## Measured", "",
             f"TFLOP/s on {rows[0]['shape']} (target in brackets where the issue sets one):", "",
             "| | " + " | ".join(names[n] for n in (*OURS, *peers)) + " |", "|---" * (1 + len(OURS) + len(peers)) + "|"]
    for r in rows:
        cells = []
        for n in OURS:
            t, goal = r["tflops"].get(n), r["targets_tflops"].get(n)
            cells.append("—" if t is None else f"**{t:.0f}**" + (f" ({goal})" if goal else ""))
        cells += ["—" if n not in r["peers_tflops"] else f"{r['peers_tflops'][n]:.0f}" for n in peers]
        lines.append(f"| {r['mode']}{', causal' if r['causal'] else ''} | " + " | ".join(cells) + " |")
    r0 = rows[0]
    lines += ["", f"{r0['gpu']}, {r0['date']}, torch {r0['torch']}, triton {r0['triton']}, nvidia-cutlass-dsl "
              f"{r0['cutlass_dsl']}; {r0['method']}; FLOPs as FlashAttention counts them (forward 4·B·H·S²·D, "
              "halved when causal; forward+backward 3.5× the forward). Source: "
              f"`{r0['source']}` (written by `benchmarks/attention_peers.py`"
              + (f", with the sweep over sequence lengths and head dims and its plot "
                 f"`{Path(r0['source']).with_suffix('.png')}`)." if r0.get("sweep", True) else
                 " with `--quick`: the headline shape only)."), END]
    return "\n".join(lines)


def update_card(path: Path) -> list[str]:
    """Copy a results file's headline figures into the attention card (card.json `measured`, card.md block)."""
    if not path.resolve().is_relative_to(ROOT / "benchmarks" / "results"):
        raise SystemExit(f"{path}: copy the results file under benchmarks/results/ first (cards cite it there)")
    data = json.loads(path.read_text())
    rows = card_rows(data, "attention", str(path.resolve().relative_to(ROOT)))
    if not rows:
        return []
    from benchmarks.common import write_measured

    write_measured(CARD, rows, card_markdown(rows))
    return ["attention"]


# ------------------------------------------------------------------------------------------ plot


def plot(result: dict, path: Path) -> Path:
    """TFLOP/s against sequence length: one panel per (head dim, causal, mode), a line per impl."""
    from benchmarks.rowwise_peers import _COLORS, _Canvas

    rows = [r for r in result.get("rows", []) if "tflops" in r and r["b"] * r["s"] == TOKENS]
    impls = [n for n in IMPLS if any(r["impl"] == n for r in rows)]
    colors = {n: _COLORS[i % len(_COLORS)] for i, n in enumerate(impls)}
    panels = [(d, c, m) for d in (128, 64) for c in (False, True) for m in ("fwd", "fwd+bwd")]
    cols, pw, ph = 4, 300, 220
    canvas = _Canvas(cols * (pw + 70) + 40, 2 * (ph + 70) + 100)
    canvas.text(20, 10, "attention tflop/s against sequence length (bf16, 16k tokens, hidden 2048, h200)", scale=2)
    for i, name in enumerate(impls):
        canvas.rect(20 + i * 130, 40, 32 + i * 130, 46, colors[name])
        canvas.text(36 + i * 130, 40, name)
    ymax = max([800.0] + [r["tflops"] for r in rows])
    for k, (d, causal, mode) in enumerate(panels):
        x0, y0 = 60 + (k % cols) * (pw + 70), 100 + (k // cols) * (ph + 70)
        _panel(canvas, x0, y0, pw, ph, f"d{d} {'causal' if causal else 'full'} {mode}", rows, (d, causal, mode),
               colors, ymax)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(canvas.png())
    return path


def _panel(c, x0: int, y0: int, w: int, h: int, title: str, rows: list[dict], key: tuple, colors: dict,
           ymax: float) -> None:
    c.text(x0, y0 - 14, title)
    c.line(x0, y0 + h, x0 + w, y0 + h, (0, 0, 0))
    c.line(x0, y0, x0, y0 + h, (0, 0, 0))
    lo, hi = math.log2(SWEEP_S[0]), math.log2(SWEEP_S[-1])
    xs = lambda s: x0 + (math.log2(s) - lo) / (hi - lo) * (w - 10) + 5  # noqa: E731
    ys = lambda t: y0 + h - t / ymax * h  # noqa: E731
    for t in range(0, int(ymax) + 1, 100):
        c.line(x0 - 3, ys(t), x0 + w, ys(t), (225, 225, 225))
        c.text(x0 - 28, int(ys(t)) - 3, str(t))
    for s in SWEEP_S:
        c.text(int(xs(s)) - 8, y0 + h + 5, f"{s // 1024}k" if s >= 1024 else str(s))
    for name, color in colors.items():
        pts = sorted((r["s"], r["tflops"]) for r in rows
                     if r["impl"] == name and (r["d"], r["causal"], r["mode"]) == key)
        for (sa, ta), (sb, tb) in zip(pts, pts[1:], strict=False):
            c.line(xs(sa), ys(ta), xs(sb), ys(tb), color, thick=2)
        for s, t in pts:
            c.rect(int(xs(s)) - 2, int(ys(t)) - 2, int(xs(s)) + 3, int(ys(t)) + 3, color)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--impls", default=",".join(IMPLS), help="comma-separated, from: " + ", ".join(IMPLS))
    p.add_argument("--quick", action="store_true", help="the headline shape only")
    p.add_argument("--budget", type=float, default=270.0, help="seconds after which no new shape starts")
    p.add_argument("--tune", action="store_true", help="time every autotune config of ours (headline shape)")
    p.add_argument("--plot", type=Path, help="redraw the PNG of a results file (no GPU needed)")
    p.add_argument("--cards", type=Path, help="copy a results file's figures into the card (no GPU needed)")
    p.add_argument("--out-dir", "--out", default="", help="folder for the JSON and PNG (default: $OUT, or "
                   "benchmarks/results)")
    args = p.parse_args(argv)
    if args.cards:
        print(update_card(args.cards))
    elif args.plot:
        print(plot(json.loads(args.plot.read_text()), args.plot.with_suffix(".png")))
    elif args.tune:
        tune(args)
    else:
        run(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
