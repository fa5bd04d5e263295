"""The CuTe DSL attention kernels (kernelagent/kernels/attention/cute.py) without a GPU.

* The backward block shared with triton.py is identical in both files.
* Both kernel files pass the verifier's static policy (ModelNew reaches only our own kernels).
* Compile-only for sm_90a, in a child process (this file run as a script, the verifier's CuTe
  hooks installed, launches skipped): causal and not, head dims 64 and 128, fp16 and bf16, a window
  with softcap, the overlapped (ping-pong) and plain schedules; ptxas registers and spills, and
  what the forward's PTX holds (wgmma, TMA loads, setmaxnreg, the named barriers of the ping-pong);
  the backward's dK/dV and dQ kernels in the same variants (registers and spills), and the default
  fused backward kernel in those without a softcap (its bulk reduction in the PTX; no spills but 8 bytes of
  stack in the causal d128 kernel); the forward and the fused kernel launched by pointers (row-major) and by
  DLPack tensors (strided).
Numerics need the H200: tests/kernels/test_attention_gpu.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "kernelagent" / "kernels" / "attention"
BEGIN, END = "# ==== shared backward:", "# ==== end of the shared backward ===="
# (head dim, window, softcap, overlap, dtype, (b, sq, sk, hq, hkv)): what the child compiles; 1 x 37 x 2
# puts the second softmax statistic at a 296-byte offset (not 16-byte aligned: the verifier found it)
CASES = [(128, (None, 0), None, True, "bfloat16", (2, 200, 190, 4, 2)),
         (64, (None, None), None, False, "float16", (1, 37, 37, 2, 1)),
         (128, (16, 3), 20.0, True, "bfloat16", (2, 200, 190, 4, 2))]


def _block(path: Path) -> str:
    text = path.read_text()
    return text[text.index(BEGIN):text.index(END)]


def test_shared_backward_block_is_identical():
    triton_block, cute_block = _block(FOLDER / "triton.py"), _block(FOLDER / "cute.py")
    assert "def _bwd_launch(" in triton_block and "def attention_cpu(" in triton_block
    assert triton_block == cute_block, "the shared backward block differs between triton.py and cute.py"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["triton.py", "cute.py"])
def test_library_files_pass_the_static_policy(name):
    from kernelagent.verifier.policy.check import check_policy

    result = check_policy((FOLDER / name).read_text(), name)
    assert result.ok, "\n".join(f"{f.line}: {f.rule}: {f.snippet} ({f.message})" for f in result.findings)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict:
    dump = tmp_path_factory.mktemp("ptx")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUTE_DSL_")}
    env.update(CUTE_DSL_ARCH="sm_90a", CUTE_DSL_KEEP="ptx", CUTE_DSL_DUMP_DIR=str(dump),
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p))
    proc = subprocess.run([sys.executable, str(Path(__file__))], cwd=str(dump), env=env, capture_output=True,
                          text=True, timeout=1500)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("JSON:")), None)
    assert line is not None, f"child failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(line[5:])


@pytest.mark.cute
@pytest.mark.slow
def test_forward_compiles_for_sm90a_in_every_variant(compiled):
    errors = [f"{c['case']}: {c['error']}" for c in compiled["cases"] if c["error"]]
    assert not errors, "\n\n".join(errors)
    assert all(c["launches"] == 1 for c in compiled["cases"]), compiled["cases"]
    assert compiled["strided"] == {"error": None, "launches": 1}, compiled["strided"]
    forward = [c for c in compiled["compiles"] if "FlashFwdSm90" in c["kernel"]]
    assert len(forward) == len(CASES) + 1  # the cases by pointers (row-major), then the first by DLPack tensors
    for c in forward:
        assert c["registers"] and not c["spills"] and not c["stack_bytes"], c
    assert forward[-1]["registers"] == forward[0]["registers"] and forward[-1]["kernel"] != forward[0]["kernel"]


@pytest.mark.cute
def test_tma_ready_copies_what_tma_cannot_take():
    """The CuTe launches promise the compiler 16-byte aligned bases and strides: a row-major tensor whose base is
    off by one element must come back as an aligned copy (`contiguous()` would hand it back as it is), a strided
    but aligned one as itself, and one with an odd row stride as an aligned copy."""
    from kernelagent.kernels.attention import cute as ac
    flat = torch.randn(2 * 64 * 4 * 128 + 1).bfloat16()
    off = flat[1:].view(2, 64, 4, 128)
    assert off.is_contiguous() and off.data_ptr() % 16
    fixed = ac._tma_ready(off)
    assert fixed.data_ptr() % 16 == 0 and fixed.is_contiguous() and torch.equal(fixed, off)
    sliced = torch.randn(2, 64, 8, 128).bfloat16()[:, :, :4]
    assert ac._tma_ready(sliced) is sliced
    odd = torch.randn(2, 64, 4, 129).bfloat16()[..., :128]
    fixed = ac._tma_ready(odd)
    assert fixed.data_ptr() % 16 == 0 and all(s * 2 % 16 == 0 for s in fixed.stride()[:-1])
    assert torch.equal(fixed, odd)


@pytest.mark.cute
def test_fused_launch_by_pointers_refuses_strided_tensors():
    """Asked for the pointer launch (which reads every tensor as row-major) with a strided one, fused_kernel
    raises instead of launching a kernel that would read the wrong elements."""
    from kernelagent.kernels.attention import cute as ac
    q = torch.randn(1, 64, 8, 64).bfloat16()[:, :, :4]
    k = torch.randn(1, 64, 4, 64).bfloat16()
    tab = torch.zeros(1, 4, 4, ac.BWD_PAD)
    with pytest.raises(ac.AttentionError, match="row-major"):
        ac.fused_kernel(q, k, k, q, tab, torch.empty_like(k), torch.empty_like(k), *ac.fused_buffers(q, tab),
                        0.125, (None, None), dense=True)


@pytest.mark.cute
def test_fused_backward_settings_per_head_dim():
    """What the card and FlashBwdFusedSm90's notes say ships (each the faster on the H200, in alternating
    rounds): at d128 the shared dQ schedule with predicated atomics, at d64 the private one without."""
    from kernelagent.kernels.attention import cute as ac
    chosen = {d: {k: ac._fused_tiles(d)[k] for k in ("private_dq", "pred_reds")} for d in (64, 128)}
    assert chosen == {64: {"private_dq": True, "pred_reds": False}, 128: {"private_dq": False, "pred_reds": True}}


@pytest.mark.cute
@pytest.mark.slow
def test_backward_kernels_compile_for_sm90a_in_every_variant(compiled):
    """dK/dV and dQ in each case's variant: no spills, but for a few bytes in dK/dV with a softcap (its
    tanh pass runs with five register tiles live; the Triton backward spills there too). The fused
    backward (cases without a softcap, its default shared-dQ schedule with predicated atomics): its bulk
    reduction in the PTX, no spills but two loop-invariant values (8 bytes) in the causal d128 kernel."""
    errors = [f"{c['case']}: {c['error']}" for c in compiled["backward"] if c["error"]]
    assert not errors, "\n\n".join(errors)
    fused_cases = [case for case in CASES if case[2] is None]
    assert [c["launches"] for c in compiled["backward"]] == [2 + (case[2] is None) for case in CASES]
    fused = [c for c in compiled["compiles"] if "FlashBwdFusedSm90" in c["kernel"]]
    # the cases by pointers (row-major), then the first by DLPack tensors (strided): the same registers
    assert compiled["fused_strided"] == {"error": None, "launches": 1}, compiled["fused_strided"]
    assert len(fused) == len(fused_cases) + 1 and len(fused_cases) == len(compiled["fused_ptx"]), fused
    assert fused[-1]["registers"] == fused[0]["registers"] and fused[-1]["kernel"] != fused[0]["kernel"], fused
    for c, case, facts in zip(fused, fused_cases, compiled["fused_ptx"].values(), strict=False):
        allowed = 8 if case[1] == (None, 0) and case[0] == 128 else 0
        assert c["registers"] and c["stack_bytes"] <= allowed and c["spills"] <= 4 * allowed, (case, c)
        assert facts and facts["bulk_reduce"] >= 1 and facts["wgmma"] >= 16, (case, facts)
    for name in ("FlashBwdDkDvSm90", "FlashBwdDqSm90"):
        kernels = [c for c in compiled["compiles"] if name in c["kernel"]]
        assert len(kernels) == len(CASES), (name, compiled["compiles"])
        for c, case in zip(kernels, CASES, strict=True):
            allowed = 64 if case[2] is not None and name == "FlashBwdDkDvSm90" else 0
            assert c["registers"] and c["spills"] <= allowed and c["stack_bytes"] <= allowed, (case, c)


@pytest.mark.cute
@pytest.mark.slow
def test_ptx_has_tma_wgmma_register_split_and_ping_pong(compiled):
    ptx = compiled["ptx"]
    assert len(ptx) == len(CASES), ptx
    for case, facts in ptx.items():
        assert facts and facts["wgmma"] >= 16 and facts["tma_load"] >= 3 and facts["setmaxnreg"] >= 2, (case, facts)
        overlapped = "True" in case.split("]")[0].split(",")[-2]
        assert (facts["named_barriers"] >= 3) == overlapped, (case, facts)  # pre-arrive, wait, pass


# ------------------------------------------------------------------------- the compile-only child


NAMED_BARRIER = re.compile(r"\bbar\.(?:sync|arrive)\s+[^,;]+,\s*256;")  # two warpgroups: the ping-pong


def _ptx_facts(folder: Path) -> dict | None:
    """Facts of the newest PTX dump (every variant dumps to the same file name: read it at once)."""
    paths = sorted(folder.glob("*.ptx"), key=lambda p: p.stat().st_mtime)
    if not paths:
        return None
    text = paths[-1].read_text(errors="replace")
    return {"wgmma": len(re.findall(r"wgmma\.mma_async", text)),
            "tma_load": len(re.findall(r"cp\.async\.bulk\.tensor", text)),
            "setmaxnreg": len(re.findall(r"setmaxnreg", text)), "named_barriers": len(NAMED_BARRIER.findall(text)),
            "bulk_reduce": len(re.findall(r"cp\.reduce\.async\.bulk\.global", text))}


def _child() -> None:
    import traceback

    import torch

    from kernelagent.verifier.cute import support as cs

    stats: dict = {}
    cs.install_hooks(stats)
    from kernelagent.kernels.attention import cute as ac

    cases, backward, ptx, fused_ptx = [], [], {}, {}
    dump = Path(os.environ.get("CUTE_DSL_DUMP_DIR", "."))
    with cs.compile_only_mode(stats):
        for d, window, cap, overlap, dtype, (b, sq, sk, hq, hkv) in CASES:
            dt = getattr(torch, dtype)
            q = torch.randn(b, sq, hq, d, dtype=dt)
            k = torch.randn(b, sk, hkv, d, dtype=dt)
            before = stats["cute_launches_skipped"]
            try:
                ac.attention_forward(q, k, k, d ** -0.5, cap, window, overlap=overlap)
                error = None
            except Exception as e:  # noqa: BLE001 - reported per case, the test names it
                error = f"{type(e).__name__}: {cs.clean_error(str(e))[:1500]}\n{traceback.format_exc()[-1500:]}"
            cases.append({"case": [d, window, cap, overlap, dtype], "shape": [b, sq, sk, hq, hkv], "error": error,
                          "launches": stats["cute_launches_skipped"] - before})
            ptx[str(cases[-1]["case"])] = _ptx_facts(dump)
        d, window, cap, overlap, dtype, (b, sq, sk, hq, hkv) = CASES[0]  # again, strided: the DLPack launch
        dt = getattr(torch, dtype)
        q = torch.randn(b, sq, 2 * hq, d, dtype=dt)[:, :, :hq]
        k = torch.randn(b, sk, 2 * hkv, d, dtype=dt)[:, :, :hkv]
        before = stats["cute_launches_skipped"]
        try:
            ac.attention_forward(q, k, k, d ** -0.5, cap, window, overlap=overlap)
            error = None
        except Exception as e:  # noqa: BLE001 - reported, the test names it
            error = f"{type(e).__name__}: {cs.clean_error(str(e))[:1500]}\n{traceback.format_exc()[-1500:]}"
        strided = {"error": error, "launches": stats["cute_launches_skipped"] - before}
        for d, window, cap, _, dtype, (b, sq, sk, hq, hkv) in CASES:  # the backward's two kernels
            dt = getattr(torch, dtype)
            q = torch.randn(b, sq, hq, d, dtype=dt)
            k = torch.randn(b, sk, hkv, d, dtype=dt)
            tab = torch.zeros(b, hq, 4, -(-sq // ac.BWD_PAD) * ac.BWD_PAD)
            before = stats["cute_launches_skipped"]
            try:
                ac.dkdv_backward(q, k, k, q, tab, torch.empty_like(k), torch.empty_like(k), d ** -0.5, cap, window)
                ac.dq_backward(q, k, k, q, tab, torch.empty_like(q), True, d ** -0.5, cap, window)
                if cap is None:  # the fused backward (no softcap); its Triton post-pass runs on the GPU only
                    ac.fused_kernel(q, k, k, q, tab, torch.empty_like(k), torch.empty_like(k),
                                    *ac.fused_buffers(q, tab), d ** -0.5, window)
                    fused_ptx[str(cases[len(backward)]["case"])] = _ptx_facts(dump)
                error = None
            except Exception as e:  # noqa: BLE001 - reported per case, the test names it
                error = f"{type(e).__name__}: {cs.clean_error(str(e))[:1500]}\n{traceback.format_exc()[-1500:]}"
            backward.append({"case": [d, window, cap, dtype], "error": error,
                             "launches": stats["cute_launches_skipped"] - before})
        d, window, _, _, dtype, (b, sq, sk, hq, hkv) = CASES[0]  # the fused kernel again, strided: by DLPack
        dt = getattr(torch, dtype)
        q = torch.randn(b, sq, 2 * hq, d, dtype=dt)[:, :, :hq]
        k = torch.randn(b, sk, 2 * hkv, d, dtype=dt)[:, :, :hkv]
        tab = torch.zeros(b, hq, 4, -(-sq // ac.BWD_PAD) * ac.BWD_PAD)
        before = stats["cute_launches_skipped"]
        try:
            ac.fused_kernel(q, k, k, q, tab, torch.empty(k.shape, dtype=dt), torch.empty(k.shape, dtype=dt),
                            *ac.fused_buffers(q, tab), d ** -0.5, window)
            error = None
        except Exception as e:  # noqa: BLE001 - reported, the test names it
            error = f"{type(e).__name__}: {cs.clean_error(str(e))[:1500]}\n{traceback.format_exc()[-1500:]}"
        fused_strided = {"error": error, "launches": stats["cute_launches_skipped"] - before}
    compiles = [{k: c.get(k) for k in ("kernel", "registers", "spills", "stack_bytes", "compile_seconds")}
                for c in stats.get("cute_compiles", [])]
    print("JSON:" + json.dumps({"cases": cases, "backward": backward, "compiles": compiles, "ptx": ptx,
                                "fused_ptx": fused_ptx, "strided": strided, "fused_strided": fused_strided}))


if __name__ == "__main__":
    _child()
