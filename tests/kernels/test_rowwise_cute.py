"""The row-wise CuTe DSL kernels (kernelagent/kernels/*/cute.py) without a GPU: the tiling rule, the
shared blocks kept identical across files, and (in one child process, ~1-2 min) a compile of every
kernel for sm_90a, forward and backward, with ptxas registers / spills and PTX facts. Numerics need
the GPU: tests/kernels/test_rowwise_gpu.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "kernelagent" / "kernels"
ROWWISE = ("softmax", "log_softmax", "rms_norm", "layer_norm")


def _block(path: Path, start: str, end: str) -> str:
    text = path.read_text()
    return text[text.index(start):text.index(end)]


def test_shared_blocks_are_identical():
    engines = {f: _block(KERNELS / f / "cute.py", "# ---- row engine", "# ---- end of the row engine") for f in ROWWISE}
    assert len(set(engines.values())) == 1, "the row engine differs between the cute.py files"
    helpers = {f: _block(KERNELS / f / "cute.py", "# ---- norm backward helpers", "# ---- end of the norm backward")
               for f in ("rms_norm", "layer_norm")}
    assert len(set(helpers.values())) == 1


@pytest.mark.cute
@pytest.mark.parametrize("n", [1, 2, 7, 64, 1000, 1023, 4096, 8192, 16384, 20000, 32768, 40000, 65536, 131071, 262144])
@pytest.mark.parametrize("values", [16, 32])
@pytest.mark.parametrize("elem_bytes", [2, 4])
def test_tiling_covers_the_row_and_gives_every_cta_columns(n, values, elem_bytes):
    sys.path.insert(0, str(ROOT))
    from kernelagent.kernels.softmax import cute as engine

    vec = 16 // elem_bytes
    while n % vec:
        vec //= 2
    t = engine.tiling(n, vec, values)
    assert t.cols * t.cluster >= n  # the tiles cover the row
    assert (t.cluster - 1) * t.cols < n  # the last CTA of a cluster still owns columns
    assert t.threads <= engine.MAX_THREADS and t.cluster <= engine.MAX_CLUSTER
    assert t.tpr * t.rows == t.threads and (t.rows == 1 or t.cluster == 1)
    assert t.vpt * t.vec <= 4 * values  # registers stay bounded
    if -(-n // vec) <= engine.MAX_CTA_THREADS_PER_ROW * max(1, values // vec):
        assert t.cluster == 1  # rows that fit one CTA stay in one CTA


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict:
    dump = tmp_path_factory.mktemp("ptx")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUTE_DSL_")}
    env.update(CUTE_DSL_ARCH="sm_90a", CUTE_DSL_KEEP="ptx", CUTE_DSL_DUMP_DIR=str(dump),
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p))
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("cute_rowwise_child.py"))], cwd=str(dump),
                          env=env, capture_output=True, text=True, timeout=1200)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("JSON:")), None)
    assert line is not None, f"child failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(line[5:])


@pytest.mark.cute
def test_every_kernel_compiles_for_sm90a(compiled):
    errors = [f"{c['family']} {c['shape']} {c['dtype']} {c['variant']}: {c['error']}" for c in compiled["cases"]
              if c["error"]]
    assert not errors, "\n\n".join(errors)
    for c in compiled["cases"]:
        # forward and backward launched (the norms' backward adds a column sum per parameter)
        assert c["launches"] >= 2, c
    names = " ".join(compiled["skipped"])
    for family in ("softmax", "log_softmax", "rms", "ln"):
        assert f"_{family}_fwd_kernel" in names and f"_{family}_bwd_kernel" in names
    assert "_column_sum_kernel" in names


@pytest.mark.cute
def test_registers_and_spills(compiled):
    assert compiled["compiles"] and all(c["registers"] for c in compiled["compiles"])
    # rows held in registers: no spills, except a little in the 262144-wide backwards (log_softmax's CTAs of
    # 1024 threads cap a thread at 64 registers; rms_norm's of 512 at 128, holding x, dy and the weight's
    # gradient: a few hundred bytes, where 1024 threads spilled ~1.5 KB)
    heavy = [c for c in compiled["compiles"] if (c["spills"] or 0) > 0]
    assert all("bwd" in c["kernel"] for c in heavy), heavy
    assert len(heavy) <= 2 and all(c["spills"] <= 512 for c in heavy if "rms" in c["kernel"]), heavy


@pytest.mark.cute
def test_ptx_uses_128_bit_copies_and_the_cluster(compiled):
    ptx = compiled["ptx"]
    assert ptx, "no PTX was dumped"
    vectorised = [name for name, f in ptx.items() if f["ld_v4"] and f["st_v4"]]
    assert len(vectorised) >= 6, ptx  # every aligned case: 128-bit loads and stores
    # the 40000- and 262144-wide rows reduce across a cluster: st.async pushes completing mbarriers
    # (one cluster barrier, at the start, for the mbarriers' initialisation), no remote loads
    clustered = [name for name, f in ptx.items() if f["st_async"] and f["mbarrier_wait"]]
    assert len(clustered) >= 8, ptx  # forward and backward of each clustered case
    assert all(ptx[name]["cluster_barrier"] == 1 for name in clustered), ptx
    assert not any(f["dsmem_load"] for f in ptx.values()), ptx


@pytest.mark.cute
@pytest.mark.parametrize("family", ROWWISE)
@pytest.mark.parametrize("n", [1000, 16384, 20000, 32768, 65536, 131071, 262144, 500000])
def test_each_spread_table_gives_a_valid_tiling_within_its_limits(family, n):
    """The per-family spread tables (CTAs of 256 threads and clusters of 16 where the H200 measured them
    faster): every width gets a tiling that covers the row, stays within the limits its table names, keeps
    registers bounded and gives every CTA of a cluster columns."""
    import importlib

    import torch

    sys.path.insert(0, str(ROOT))
    mod = importlib.import_module(f"kernelagent.kernels.{family}.cute")
    x = torch.empty(2, n, dtype=torch.bfloat16)
    for spread in (mod.FWD_SPREAD, mod.BWD_SPREAD):
        per_cta, max_cluster, max_threads = spread.limits(n)
        t = mod.tiling_for([x], spread)
        assert t.cols * t.cluster >= n and (t.cluster - 1) * t.cols < n
        assert t.vpt * t.vec <= 4 * spread.values
        # within the table's limits, or (where they cannot hold the row: 500000 columns) the default tiling
        assert (t.threads <= max_threads and t.cluster <= max_cluster) or t == mod.tiling(n, t.vec, spread.values)
        if n <= 16384:  # rows up to 16K keep the portable spread
            assert spread.limits(n) == (mod.MAX_CTA_THREADS_PER_ROW, mod.MAX_CLUSTER, mod.MAX_THREADS)
    wide = mod.tiling_for([torch.empty(2, 262144, dtype=torch.bfloat16)], mod.BWD_SPREAD)
    if family in ("rms_norm", "layer_norm"):  # the norms' backward: 512 threads, 16 CTAs (was 1024 x 8: spills)
        assert (wide.threads, wide.cluster) == (512, 16)
