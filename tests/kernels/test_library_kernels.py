"""The library's Triton kernels (kernelagent/kernels/*/triton.py), run under the CPU interpreter in
a child process: forward and backward against torch autograd in fp32 and bf16, each ModelNew
against its reference.py, and the registered custom ops (opcheck, fake impls, torch.compile).

Tolerances: tests/helpers/tolerance.py.
"""

from __future__ import annotations

import pytest

from tests.helpers.interp import run_in_interpreter
from tests.helpers.tolerance import failure


def _failures(rows: list[dict]) -> list[str]:
    return [f"{r['family']} {r['what']} {r.get('case', r.get('set'))} {r['dtype']}: {failure(r)}"
            for r in rows if failure(r)]


@pytest.fixture(scope="module")
def results() -> dict:
    code = ("from tests.helpers.interp import emit\n"
            "from tests.helpers import interp_checks as c\n"
            "emit({'functions': c.check_library_functions(), 'models': c.check_library_models(),"
            " 'ops': c.check_custom_ops()})\n")
    return run_in_interpreter(code)


@pytest.mark.parametrize("family", ["softmax", "rms_norm", "cross_entropy"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_forward_and_backward_match_torch(results, family, dtype):
    rows = [r for r in results["functions"] if r["family"] == family and r["dtype_name"] == dtype]
    assert len(rows) >= 8, f"too few {family} checks ran: {len(rows)}"
    assert any(r["what"].startswith("grad") for r in rows)
    assert not _failures(rows), "\n".join(_failures(rows))


@pytest.mark.parametrize("family", ["softmax", "rms_norm", "cross_entropy"])
def test_model_new_matches_reference(results, family):
    rows = [r for r in results["models"] if r["family"] == family]
    assert any(r["what"] == "out" for r in rows) and any(r["what"].startswith("grad") for r in rows)
    assert not _failures(rows), "\n".join(_failures(rows))


def test_rms_norm_model_checks_weight_gradient(results):
    # input x plus the weight parameter: two gradients per input set
    rows = [r for r in results["models"] if r["family"] == "rms_norm" and r["set"] == 0]
    assert sorted(r["what"] for r in rows) == ["grad0", "grad1", "out"]


def test_custom_ops_are_registered_and_traceable(results):
    ops = results["ops"]
    assert ops["opcheck"] == {name: True for name in ("softmax_fwd", "softmax_bwd", "rms_norm_fwd",
                                                      "rms_norm_bwd", "cross_entropy_fwd", "cross_entropy_bwd")}
    assert ops["second_import_ok"] and ops["compiled_ok"] and ops["rms_y_close"]
    assert ops["ce_loss_dtype"] == "torch.float32" and ops["ce_count"] == 3.0  # one of four targets is -100
    assert ops["rms_rstd_shape"] == [3]


def test_failures_are_reported():
    # the checker itself must flag a bad row (a wrong value and a wrong dtype)
    row = {"family": "softmax", "what": "out", "case": "x", "dtype": "torch.float32", "ref_dtype": "torch.float32",
           "shape": [2], "ref_shape": [2], "nan": False, "rel": 3e-5, "peak": 1e-5, "floor": 1e-7,
           "floor_peak": 1e-7}
    assert _failures([row])
    assert _failures([dict(row, rel=1e-7, dtype="torch.bfloat16")])
    assert not _failures([dict(row, rel=1e-7)])
    bf16 = dict(row, dtype="torch.bfloat16", ref_dtype="torch.bfloat16", rel=2.5e-2, floor=1.5e-2)
    assert not _failures([bf16]) and _failures([dict(bf16, floor=3e-3)])
