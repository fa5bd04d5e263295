"""The row-wise Triton kernels compiled ahead of time for sm_90 without a GPU (what the interpreter cannot
check: constexpr branches, layouts, register use): each kernel in the configurations its launch tables
pick, with ptxas registers and spills read from the cubin."""

from __future__ import annotations

import importlib
import re
import subprocess
from pathlib import Path

import pytest
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

TARGET = GPUTarget("cuda", 90, 32)
P16, P32, I32 = "*bf16", "*fp32", "i32"


def _mod(family: str):
    return importlib.import_module(f"kernelagent.kernels.{family}.triton")


def _cases() -> list[tuple[str, object, dict[str, str], dict, int]]:
    """(label, kernel, signature, constexprs, num_warps)."""
    out = []
    for family, fwd, fwd_loop, bwd, bwd_loop in (
            ("softmax", "_softmax_fwd_kernel", "_softmax_fwd_looped_kernel", "_softmax_bwd_kernel",
             "_softmax_bwd_looped_kernel"),
            ("log_softmax", "_log_softmax_fwd_kernel", "_log_softmax_fwd_looped_kernel", "_log_softmax_bwd_kernel",
             "_log_softmax_bwd_looped_kernel")):
        m = _mod(family)
        sig = {"x_ptr": P16, "y_ptr": P16, "n_rows": I32, "n_cols": I32, "x_stride": I32, "y_stride": I32}
        for block, rows, warps in ((1024, 8, 4), (8192, 1, 16), (32768, 1, 16)):
            out.append((f"{family} fwd {block}x{rows}", getattr(m, fwd), sig, {"ROWS": rows, "BLOCK": block}, warps))
        loop_sig = {k: v for k, v in sig.items() if k != "n_rows"}
        out.append((f"{family} fwd loop", getattr(m, fwd_loop), loop_sig, {"BLOCK": 8192}, 16))
        bsig = {"y_ptr": P16, "dy_ptr": P16, "dx_ptr": P16, "n_rows": I32, "n_cols": I32, "y_stride": I32,
                "dy_stride": I32, "dx_stride": I32}
        for block, rows, warps in ((256, 32, 4), (16384, 1, 16)):
            out.append((f"{family} bwd {block}x{rows}", getattr(m, bwd), bsig, {"ROWS": rows, "BLOCK": block}, warps))
        out.append((f"{family} bwd loop", getattr(m, bwd_loop), {k: v for k, v in bsig.items() if k != "n_rows"},
                    {"BLOCK": 8192}, 16))
    rms = _mod("rms_norm")
    fsig = {"x_ptr": P16, "r_ptr": P16, "w_ptr": P16, "y_ptr": P16, "s_ptr": P16, "rstd_ptr": P32, "n_rows": I32,
            "n_cols": I32, "x_stride": I32, "r_stride": I32, "y_stride": I32, "s_stride": I32, "eps": "fp32"}
    for flags in ({"HAS_RES": True, "HAS_W": True}, {"HAS_RES": False, "HAS_W": False}):
        out.append((f"rms fwd 8192 {flags}", rms._rms_fwd_kernel, fsig, {"ROWS": 1, "BLOCK": 8192, **flags}, 16))
        out.append((f"rms fwd loop {flags}", rms._rms_fwd_looped_kernel, {k: v for k, v in fsig.items()
                                                                            if k != "n_rows"},
                    {"BLOCK": 4096, **flags}, 8))
    bsig = {"x_ptr": P16, "w_ptr": P16, "dy_ptr": P16, "dres_ptr": P16, "rstd_ptr": P32, "dx_ptr": P16,
            "dw_part_ptr": P32, "n_rows": I32, "n_cols": I32, "x_stride": I32, "dy_stride": I32, "dres_stride": I32,
            "dx_stride": I32}
    for block, rows, warps, flags in ((8192, 1, 16, {"HAS_W": True, "HAS_DRES": True}),
                                      (256, 4, 4, {"HAS_W": False, "HAS_DRES": False})):
        out.append((f"rms bwd {block} {flags}", rms._rms_bwd_kernel, bsig, {"ROWS": rows, "BLOCK": block, **flags},
                    warps))
    out.append(("rms bwd loop", rms._rms_bwd_looped_kernel, bsig, {"BLOCK": 4096, "HAS_W": True, "HAS_DRES": True}, 8))
    out.append(("column sum", rms._column_sum_kernel, {"part_ptr": P32, "out_ptr": P16, "n_parts": I32, "n_cols": I32},
                {"BLOCK": 256}, 4))
    ln = _mod("layer_norm")
    fsig = {"x_ptr": P16, "w_ptr": P16, "b_ptr": P16, "y_ptr": P16, "mean_ptr": P32, "rstd_ptr": P32, "n_rows": I32,
            "n_cols": I32, "x_stride": I32, "y_stride": I32, "eps": "fp32"}
    out.append(("ln fwd 8192", ln._ln_fwd_kernel, fsig, {"ROWS": 1, "BLOCK": 8192, "HAS_W": True, "HAS_B": True}, 16))
    out.append(("ln fwd loop", ln._ln_fwd_looped_kernel, {k: v for k, v in fsig.items() if k != "n_rows"},
                {"BLOCK": 4096, "HAS_W": True, "HAS_B": False}, 8))
    bsig = {"x_ptr": P16, "w_ptr": P16, "dy_ptr": P16, "mean_ptr": P32, "rstd_ptr": P32, "dx_ptr": P16,
            "dw_part_ptr": P32, "db_part_ptr": P32, "n_rows": I32, "n_cols": I32, "x_stride": I32, "dy_stride": I32,
            "dx_stride": I32}
    for stages in (0, 3):
        out.append((f"ln bwd 8192 stages {stages}", ln._ln_bwd_kernel, bsig,
                    {"ROWS": 1, "BLOCK": 8192, "HAS_W": True, "HAS_B": True, "STAGES": stages}, 16))
    out.append(("ln column sum pair", ln._column_sum_pair_kernel,
                {"part_ptr": P32, "out0_ptr": P16, "out1_ptr": P32, "n_parts": I32, "n_cols": I32}, {"BLOCK": 128}, 4))
    out.append(("ln bwd loop", ln._ln_bwd_looped_kernel, bsig, {"BLOCK": 4096, "HAS_W": True, "HAS_B": True}, 8))
    return out


CASES = _cases()


def _resources(cubin: bytes, tmp: Path) -> tuple[int, int]:
    path = tmp / "k.cubin"
    path.write_bytes(cubin)
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    text = subprocess.run([str(tool), "--dump-resource-usage", str(path)], capture_output=True, text=True,
                          timeout=60).stdout
    regs = int(re.search(r"REG:(\d+)", text).group(1))
    local = int(re.search(r"LOCAL:(\d+)", text).group(1))
    return regs, local


@pytest.mark.parametrize(("label", "kernel", "signature", "constexprs", "warps"), CASES, ids=[c[0] for c in CASES])
def test_kernel_compiles_for_sm90_without_spills(label, kernel, signature, constexprs, warps, tmp_path):
    sig = dict(signature) | {k: "constexpr" for k in constexprs}
    compiled = triton.compile(ASTSource(fn=kernel, signature=sig, constexprs=constexprs), target=TARGET,
                              options={"num_warps": warps})
    assert ".target sm_90" in compiled.asm["ptx"]
    regs, local = _resources(compiled.asm["cubin"], tmp_path)
    assert regs > 0
    assert local == 0, f"{label}: {local} bytes of local memory (spills) with {regs} registers"
