"""A compile for sm_90a that fails inside Triton's C++ passes says only "PassManager::run failed"; the AOT worker
names the assertion or MLIR error those passes printed. The library's attention ran an fp64 `tl.dot` under the
interpreter (its CPU-only variant), which Triton 3.6 cannot lower for sm_90 (2026-12-03)."""

from __future__ import annotations

import importlib.util
import sys
import textwrap

import pytest

pytest.importorskip("triton")

from kernelagent.verifier.worker.aot import _diagnosed, compile_one  # noqa: E402

SOURCE = textwrap.dedent('''
    import triton
    import triton.language as tl


    @triton.jit
    def f64_dot(a_ptr, c_ptr, BLOCK: tl.constexpr):
        r = tl.arange(0, BLOCK)
        x = tl.load(a_ptr + r[:, None] * BLOCK + r[None, :])
        tl.store(c_ptr + r[:, None] * BLOCK + r[None, :], tl.dot(x.to(tl.float64), x.to(tl.float64)).to(tl.float32))
''')


def test_a_failed_pass_names_its_assertion(tmp_path):
    path = tmp_path / "aot_diag_mod.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("aot_diag_mod", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["aot_diag_mod"] = mod
    try:
        spec.loader.exec_module(mod)
        req = {"kernel": "f64_dot", "args": {"a_ptr": {"kind": "ptr", "dtype": "fp16"},
                                             "c_ptr": {"kind": "ptr", "dtype": "fp32"},
                                             "BLOCK": {"kind": "int", "value": 16}}}
        with pytest.raises(RuntimeError, match="PassManager::run failed") as info:
            compile_one(mod.f64_dot, req)
    finally:
        sys.modules.pop("aot_diag_mod", None)
    assert "fp64" in _diagnosed(info.value)
