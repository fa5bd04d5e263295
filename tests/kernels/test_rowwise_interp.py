"""The row-wise library kernels in Triton (kernelagent/kernels/{softmax,log_softmax,rms_norm,layer_norm}/
triton.py) under the CPU interpreter, in one child process: forward and backward of every public
function against torch in float64 (all paths: several rows per program, one row in registers, the
column loops, odd widths, 3-D and strided inputs, no weight / bias, the fused residual add), each
ModelNew against its reference.py, and opcheck of the registered ops with the kernels behind them.

Cases: tests/kernels/rowwise_cases.py; tolerances: tests/helpers/tolerance.py. The interpreter's
numpy never fuses mul + add into an FMA; the GPU compiler does unless told not to, so the LayerNorm
backward's PTX for sm_90 (compiled here, no GPU) is checked for that too.
"""

from __future__ import annotations

import re

import pytest

from tests.helpers.interp import run_in_interpreter
from tests.kernels.rowwise_cases import FWD_OPS, INTERP_CASES, OPS, failures


@pytest.fixture(scope="module")
def results() -> dict:
    code = ("from tests.helpers.interp import emit\n"
            "from tests.kernels import rowwise_cases as c\n"
            "emit({'functions': c.interp_functions(), **c.interp_extras()})\n")
    return run_in_interpreter(code, timeout=900)


@pytest.mark.parametrize("op", OPS)
def test_forward_and_backward_match_torch(results, op):
    rows = [r for r in results["functions"] if r["op"] == op]
    cases = {(o, s, v) for o, s, v, _ in INTERP_CASES if o == op}
    assert {r["case"] for r in rows} == {f"{tuple(s)} {v}".strip() for _, s, v in cases}
    assert any(r["what"].startswith("grad") for r in rows) and any(r["what"] == "out0" for r in rows)
    assert not failures(rows), "\n".join(failures(rows))


def test_every_input_gradient_is_checked(results):
    # x (and weight, bias, residual where the op has them): one row each, none missing
    per_case = {}
    for r in results["functions"]:
        per_case.setdefault((r["op"], r["case"], r["dtype_name"]), set()).add(r["what"])
    assert per_case[("layer_norm", "(37, 3)", "float32")] == {"out0", "grad0", "grad1", "grad2"}
    assert per_case[("rms_norm_add", "(37, 3)", "float32")] == {"out0", "out1", "grad0", "grad1", "grad2"}
    assert per_case[("rms_norm", "(9, 100) no_weight", "float32")] == {"out0", "grad0"}


def test_model_new_matches_reference(results):
    rows = results["models"]
    assert {r["op"] for r in rows} == {"softmax", "log_softmax", "rms_norm", "layer_norm"}
    assert not failures(rows), "\n".join(failures(rows))


def test_registered_ops_pass_opcheck(results):
    assert set(results["opcheck"]) == set(FWD_OPS)
    for name, res in results["opcheck"].items():
        assert set(res.values()) == {"SUCCESS"}, f"{name}: {res}"


def test_failures_are_reported():
    # the checker itself must flag a bad row: a wrong value, a wrong dtype, a missing gradient
    row = {"op": "softmax", "case": "x", "dtype_name": "float32", "what": "out0", "dtype": "torch.float32",
           "ref_dtype": "torch.float32", "shape": [2], "ref_shape": [2], "nan": False, "rel": 3e-5, "peak": 1e-5,
           "floor": 1e-7, "floor_peak": 1e-7}
    assert failures([row]) and not failures([dict(row, rel=1e-7)])
    assert failures([dict(row, rel=1e-7, dtype="torch.bfloat16")])
    assert failures([dict(row, dtype="None", shape=[])])


@pytest.mark.parametrize(("name", "constexprs"), [
    ("_ln_bwd_kernel", {"n_cols": 1, "x_stride": 1, "dy_stride": 1, "dx_stride": 1, "ROWS": 16, "BLOCK": 1,
                        "STAGES": 0}),
    ("_ln_bwd_kernel", {"n_cols": 1, "x_stride": 1, "dy_stride": 1, "dx_stride": 1, "ROWS": 16, "BLOCK": 1,
                        "STAGES": 3}),
    ("_ln_bwd_looped_kernel", {"BLOCK": 64})])
def test_layer_norm_backward_is_compiled_without_fma(name, constexprs):
    # w*dy - mean(w*dy) with w*dy fused into an FMA is the product's rounding error, not 0, at width 1
    # (dx exactly 0 there): 3.8e-5 x 301 rows on the H200 in fp32. Width 1 is what Triton specialises
    # a launch with n_cols == 1 (and unit strides) to. PTX mul/add/sub without .rn may be fused by ptxas.
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kernelagent.kernels.layer_norm import triton as ln

    sig = {k: "*fp32" for k in ("x_ptr", "w_ptr", "dy_ptr", "mean_ptr", "rstd_ptr", "dx_ptr", "dw_part_ptr",
                                "db_part_ptr")}
    sig |= {k: "i32" for k in ("n_rows", "n_cols", "x_stride", "dy_stride", "dx_stride")}
    consts = {**constexprs, "HAS_W": True, "HAS_B": True}
    src = ASTSource(fn=getattr(ln, name), signature=sig | {k: "constexpr" for k in consts}, constexprs=consts)
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, **ln.BWD_OPTIONS}).asm["ptx"]
    assert re.search(r"\b(?:mul|sub)\.rn\.f32", ptx)  # the arithmetic is there, rounded op by op
    assert not re.findall(r"\b(?:fma|mad)\.\w+\.f32|\b(?:mul|add|sub)\.f32", ptx)


def test_layer_norm_backward_contracts_from_two_columns_only(monkeypatch):
    # the kernel is launched without FMA contraction at one column (the case above), with it from two
    import torch

    from kernelagent.kernels.layer_norm import triton as ln

    launches = []

    class Recorder:
        def __init__(self, name):
            self.name = name

        def __getitem__(self, grid):
            return lambda *args, **kwargs: launches.append((self.name, kwargs))

    monkeypatch.setattr(ln, "_ln_bwd_kernel", Recorder("fast"))
    monkeypatch.setattr(ln, "_column_sum_pair_kernel", Recorder("sum"))
    for n in (1, 2):
        x = torch.zeros(4, n)
        ln.launch_bwd(x, torch.ones(n), x, torch.zeros(4), torch.ones(4), x.clone(), torch.empty(n), torch.empty(n))
    fast = [kw for name, kw in launches if name == "fast"]
    assert [kw.get("enable_fp_fusion", True) for kw in fast] == [False, True]
    assert [name for name, _ in launches] == ["fast", "sum", "fast", "sum"]  # dweight and dbias in one launch
