"""The example problem/candidate pairs in examples/, checked directly (not through the verifier)
under the Triton CPU interpreter in a child process: each ModelNew against its Model on every
get_test_inputs() set in fp32 and bf16, outputs of the reference's dtype and shape, deterministic,
inputs untouched; and the deliberately wrong softmax kernel must be caught.

Tolerances: tests/helpers/tolerance.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers.interp import ROOT, run_in_interpreter
from tests.helpers.tolerance import failure as _bad

EXAMPLES = ["softmax", "rms_norm", "cross_entropy", "matmul_bias_relu"]


@pytest.fixture(scope="module")
def results() -> dict:
    names = ", ".join(repr(n) for n in EXAMPLES)
    code = ("from tests.helpers.interp import emit\n"
            "from tests.helpers import interp_checks as c\n"
            f"out = {{n: c.check_example(n) for n in ({names},)}}\n"
            "wrong = c.ROOT / 'tests/corpus/wrong/softmax/mismatch_last_column.py'\n"
            "out['softmax_wrong'] = c.check_example('softmax', str(wrong), ('float32',))\n"
            "out['rms_norm_wide'] = c.check_example_model_wide()\n"
            "emit(out)\n")
    return run_in_interpreter(code)


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_kernel_matches_reference(results, name):
    rows = results[name]
    assert {r["dtype_name"] for r in rows} == {"float32", "bfloat16"}
    bad = [f"set {r['set']} {r['dtype_name']}: {_bad(r)}" for r in rows if _bad(r)]
    assert not bad, "\n".join(bad)
    assert all(r["deterministic"] and r["inputs_unchanged"] for r in rows)


def test_rms_norm_example_column_loop(results):
    rows = results["rms_norm_wide"]
    assert rows and not any(_bad(r) for r in rows), rows


def test_wrong_softmax_is_caught(results):
    rows = results["softmax_wrong"]
    caught = [r for r in rows if _bad(r)]
    assert len(caught) >= len(rows) // 2, f"only {len(caught)} of {len(rows)} sets caught the dropped column"
    assert any(r["set"] == 2 for r in caught)  # [5, 1023]: the dropped column is plainly visible


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_files_have_problem_format(name):
    folder = Path(ROOT) / "examples" / name
    op = {n.name for n in ast.parse((folder / "op.py").read_text()).body if hasattr(n, "name")}
    assert {"Model", "get_inputs", "get_init_inputs", "get_test_inputs"} <= op
    kernel = ast.parse((folder / "kernel.py").read_text())
    assert "ModelNew" in {n.name for n in kernel.body if hasattr(n, "name")}
    imported = {a.name.split(".")[0] for n in ast.walk(kernel) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(kernel) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= {"torch", "triton", "math"}
