"""A kernel's own combine function under the interpreter (interp_combine): tl.reduce / tl.associative_scan run the
rewritten copy of a @triton.jit combine function on whole blocks (the library's LayerNorm was refused on CPU for
running it as written, 2026-12-03), results as the element-by-element interpreter gives them; anything but a
@triton.jit function is refused; the combine function's lines are recorded and found in the AOT compile. The
interpreter runs in a child with the CPU worker's patches; the compile runs here, as the AOT worker does."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[3]
MODULE = "interp_combine_kernels"

SOURCE = textwrap.dedent('''
    import triton
    import triton.language as tl


    @triton.jit
    def _add_pair(a1, a2, b1, b2):
        return a1 + b1, a2 + b2


    @triton.jit
    def _first_nonzero(a, b):  # associative, not commutative: the left operand must be the earlier element
        tl.static_assert(len(a.shape) == 0)  # scalars, as compiled, though many elements are combined at once
        return tl.where(a != 0, a, b)


    @triton.jit
    def _larger(a, b):  # an `if` on operands: cannot take blocks, runs element by element
        if a > b:
            r = a
        else:
            r = b
        return r


    def plain_add(a, b):
        return a + b


    class Fake:
        fn = staticmethod(plain_add)


    FAKE = Fake()


    @triton.jit
    def pairs(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
        offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
        v = tl.load(x_ptr + offs)
        s1, s2 = tl.reduce((v, v * 2.0), 1, _add_pair)
        tl.store(out_ptr + tl.arange(0, R), s1 + s2)
        first = tl.reduce(v, 0, _first_nonzero, keep_dims=True)
        tl.store(out_ptr + R + tl.arange(0, C)[None, :], first)
        tl.store(out_ptr + R + C, tl.reduce(v, None, _larger))
        scan = tl.associative_scan(v, 1, _add_pair_one)
        tl.store(out_ptr + R + C + 1 + offs, scan)
        back = tl.associative_scan(v, 0, _first_nonzero, reverse=True)
        tl.store(out_ptr + R + C + 1 + R * C + offs, back)


    @triton.jit
    def _add_pair_one(a, b):
        return a + b


    @triton.jit
    def python_combine(x_ptr, out_ptr, C: tl.constexpr):
        v = tl.load(x_ptr + tl.arange(0, C))
        tl.store(out_ptr, tl.reduce(v, 0, plain_add))


    @triton.jit
    def fake_combine(x_ptr, out_ptr, C: tl.constexpr):
        v = tl.load(x_ptr + tl.arange(0, C))
        tl.store(out_ptr, tl.reduce(v, 0, FAKE))
''')

CHILD = r'''
import importlib.util, json, sys
import numpy as np
import torch
from kernelagent.verifier.worker import integrity, interp_bounds, interp_calls, interp_fixes
assert interp_fixes.rewrite_what_the_compiler_compiles() and interp_fixes.keep_kernel_modules_clean()
interp_bounds.seal_handles()
interp_calls.watch()
counter = integrity.LaunchCounter()
counter.install_triton(True)
spec = importlib.util.spec_from_file_location(sys.argv[2], sys.argv[1])
mod = importlib.util.module_from_spec(spec)
sys.modules[sys.argv[2]] = mod
spec.loader.exec_module(mod)
R, C = 4, 8
x = torch.randn(R, C)
x[0, 1] = x[0, 3] = x[1, 2] = x[2, 5] = x[3, 0] = 0.0
out = torch.full((R + C + 1 + 2 * R * C,), -1.0)
mod.pairs[(1,)](x, out, R=R, C=C)
refused = {}
for name, kernel in (("function", mod.python_combine), ("fake", mod.fake_combine)):
    try:
        kernel[(1,)](x[0], out, C=C)
        refused[name] = ""
    except Exception as e:
        refused[name] = repr(e)
print("RESULT:" + json.dumps({"x": x.tolist(), "out": out.tolist(), "refused": refused,
                              "launches": counter.stats["interpreter_launches"]}))
'''


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory):
    path = Path(tmp_path_factory.mktemp("interp_combine")) / f"{MODULE}.py"
    path.write_text(SOURCE)
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path), MODULE], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.split("RESULT:", 1)[1])
    spec = importlib.util.spec_from_file_location(MODULE, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = mod
    spec.loader.exec_module(mod)
    yield mod, result
    sys.modules.pop(MODULE, None)


def _first_nonzero(values, axis):
    import numpy as np

    moved = np.moveaxis(values, axis, -1)
    picked = [next((v for v in row if v != 0), 0.0) for row in moved.reshape(-1, moved.shape[-1])]
    return np.array(picked).reshape(moved.shape[:-1])


def test_reductions_and_scans_compute_what_the_element_wise_interpreter_does(interpreted):
    import numpy as np

    _, result = interpreted
    x, out = np.array(result["x"], dtype=np.float32), np.array(result["out"], dtype=np.float32)
    rows, cols = x.shape
    np.testing.assert_allclose(out[:rows], x.sum(1) * 3, rtol=1e-5)
    np.testing.assert_array_equal(out[rows:rows + cols], _first_nonzero(x, 0))
    assert out[rows + cols] == x.max()
    at = rows + cols + 1
    np.testing.assert_allclose(out[at:at + x.size].reshape(x.shape), np.cumsum(x, 1), rtol=1e-5, atol=1e-6)
    back = out[at + x.size:].reshape(x.shape)  # reversed on axis 0: row i is f(f(x[-1], x[-2]) ..., x[i])
    np.testing.assert_array_equal(back, np.stack([_first_nonzero(x[i:][::-1], 0) for i in range(rows)]))


@pytest.mark.parametrize("name", ["function", "fake"])
def test_a_python_combine_function_is_refused(interpreted, name):
    _, result = interpreted
    assert "must be a @triton.jit function" in result["refused"][name]


def test_combine_functions_ran_as_kernel_code_and_are_in_the_compile(interpreted):
    from kernelagent.verifier.worker.aot import compile_one, find_kernel

    mod, result = interpreted
    launch = next(r for r in result["launches"] if r["kernel"] == "pairs")
    keys = {k.split(":")[1] for k in launch["ran"]}
    assert {"pairs", "_add_pair", "_first_nonzero", "_larger", "_add_pair_one"} <= keys
    compile_one(find_kernel(mod, launch), launch)  # raises NotCompiled if a combine line that ran was not generated
