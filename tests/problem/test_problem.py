"""Loader tests: every file in problems/ops loads and runs with its dtypes kept; every file in
problems/bad fails with a one-paragraph ProblemError naming the file, the line and the fault."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from kernelagent.problem import (
    ProblemError,
    inspect_candidate,
    inspect_problem,
    load_problem,
    problem_name,
    sha256_text,
    signature_mismatch,
)
from tests.paths import PROBLEMS

HERE = PROBLEMS / "ops"
GOOD = sorted(HERE.glob("*.py"))
BAD = sorted((PROBLEMS / "bad").glob("*.py"))


def _module_name(path: Path, tag: str) -> str:
    return f"kernelagent_test_{tag}_{path.stem}"


def _load(path: Path, tag: str = "good"):
    return load_problem(path, module_name=_module_name(path, tag))


def _kind(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# kind: "), f"{path.name}: first line must be '# kind: <class>'"
    return first.removeprefix("# kind: ").strip()


def _run(path: Path, tag: str = "good") -> list[tuple[list, object]]:
    """Load, build the model under a fixed seed and run it on every input set: [(inputs, output)]."""
    lp = _load(path, tag)
    torch.manual_seed(0)
    model = lp.model_cls(*lp.init_inputs())
    return [(inputs, model(*inputs)) for inputs in lp.input_sets()]


def _tensors(out: object) -> list[torch.Tensor]:
    items = list(out) if isinstance(out, (tuple, list)) else [out]
    assert all(isinstance(t, torch.Tensor) for t in items), f"outputs must be tensors, got {out!r}"
    return items


def _assert_one_paragraph(message: str) -> None:
    assert "\n" not in message, f"message spans lines: {message!r}"
    assert "Traceback" not in message and 'File "' not in message, f"traceback text in {message!r}"


# ---------------------------------------------------------------- the good corpus


def test_corpus_covers_the_kernelbench_classes():
    kinds = {_kind(p) for p in GOOD}
    assert len(GOOD) >= 14
    for needed in ("conv2d", "conv_transpose", "conv1d", "matmul", "norm", "pooling", "loss",
                   "reduction", "scan", "activation", "fused"):
        assert needed in kinds, f"no problem of kind {needed}"


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.stem)
def test_good_problem_loads_and_runs(path: Path):
    _kind(path)
    results = _run(path)
    assert results, "no input sets"
    for _inputs, out in results:
        for t in _tensors(out):
            if t.is_floating_point():
                assert torch.isfinite(t).all(), f"{path.name}: non-finite output"


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.stem)
def test_input_sets_are_exactly_what_the_file_makes(path: Path):
    """No casting or copying on the way: same types, dtypes and values as calling get_inputs() directly."""
    lp = _load(path, "direct")
    torch.manual_seed(1)
    direct = list(lp.module.get_inputs())
    torch.manual_seed(1)
    via = lp.input_sets()[0]
    assert len(via) == len(direct)
    for a, b in zip(via, direct, strict=True):
        assert type(a) is type(b)
        if isinstance(a, torch.Tensor):
            assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
        else:
            assert a == b


def test_integer_targets_stay_integer():
    (logits, targets), loss = _run(HERE / "cross_entropy.py")[0]
    assert logits.dtype == torch.float32 and targets.dtype == torch.int64
    assert loss.dtype == torch.float32 and loss.dim() == 0


def test_int32_indices_stay_int32_beside_floats():
    (table, index, weight), out = _run(HERE / "embedding_gather.py")[0]
    assert index.dtype == torch.int32 and table.dtype == weight.dtype == torch.float32
    assert out.shape == (index.numel(), table.shape[1])


def test_float64_problem_stays_float64():
    (x,), out = _run(HERE / "cumprod_float64.py")[0]
    assert x.dtype == torch.float64 and out.dtype == torch.float64
    torch.testing.assert_close(out[:, -1], x.prod(dim=1))


def test_tuple_output_keeps_both_dtypes():
    (x,), out = _run(HERE / "max_values_indices.py")[0]
    assert isinstance(out, tuple) and len(out) == 2
    values, indices = out
    assert values.dtype == torch.float32 and indices.dtype == torch.int64
    torch.testing.assert_close(values, x.gather(1, indices[:, None]).squeeze(1))


def test_non_tensor_forward_argument_is_passed_through():
    results = _run(HERE / "cumsum_dim_arg.py")
    assert len(results) == 3  # get_inputs() plus two get_test_inputs() sets
    for (x, dim), out in results:
        assert type(dim) is int
        torch.testing.assert_close(out, x.cumsum(dim))


def test_get_test_inputs_sets_follow_the_main_set():
    lp = _load(HERE / "softsign_test_inputs.py", "sets")
    assert lp.spec.has_test_inputs
    shapes = [tuple(s[0].shape) for s in lp.input_sets()]
    assert shapes == [(16, 256), (1, 1), (3, 1001), (5, 7)]
    assert all(isinstance(s, list) for s in lp.input_sets())


def test_backward_and_tolerance_are_read_and_gradients_flow():
    path = HERE / "layer_norm_backward.py"
    spec = inspect_problem(path)
    assert spec.backward is True
    assert spec.tolerance == {"atol": 1e-4, "rtol": 1e-3}
    (x,), out = _run(path)[0]
    out.pow(2).sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape and x.grad.abs().sum() > 0


def test_plain_problem_has_default_spec():
    spec = inspect_problem(HERE / "matmul_square.py")
    assert (spec.backward, spec.tolerance, spec.has_test_inputs) == (False, None, False)
    assert spec.name == "matmul_square" and spec.sha256 == sha256_text(spec.source)


def test_distinct_module_names_keep_both_problems():
    a = load_problem(HERE / "gelu_tanh.py", module_name="kernelagent_test_pair_a")
    b = load_problem(HERE / "mse_loss.py", module_name="kernelagent_test_pair_b")
    assert a.model_cls is not b.model_cls
    assert sys.modules["kernelagent_test_pair_a"] is a.module
    assert sys.modules["kernelagent_test_pair_b"] is b.module


def test_problem_name_uses_the_folder_for_op_py():
    assert problem_name("kernels/softmax/op.py") == "softmax"
    assert problem_name("kernels/softmax/reference.py") == "softmax"
    assert problem_name("somewhere/19_ReLU.py") == "19_ReLU"


# ---------------------------------------------------------------- the bad corpus


def _expectation(path: Path) -> tuple[list[str], str, int | None]:
    """Header `# expect: a | b` and `# stage: inspect|import|call`; the faulty line carries `# <- here`."""
    lines = path.read_text().splitlines()
    expect = [s.strip() for s in lines[0].removeprefix("# expect:").split("|")]
    stage = lines[1].removeprefix("# stage:").strip()
    marked = [i + 1 for i, line in enumerate(lines) if line.rstrip().endswith("# <- here")]
    return expect, stage, (marked[0] if marked else None)


def _load_everything(path: Path) -> None:
    lp = _load(path, "bad")
    lp.init_inputs()
    lp.input_sets()


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_problem_raises_a_clear_problem_error(path: Path):
    expect, stage, line = _expectation(path)
    with pytest.raises(ProblemError) as info:
        _load_everything(path)
    message = str(info.value)
    _assert_one_paragraph(message)
    assert message.startswith(f"problem file {path}"), message
    for part in expect:
        assert part in message, f"{part!r} not in {message!r}"
    assert info.value.path == str(path)
    if line is not None:
        assert f"{path}, line {line}:" in message
        assert info.value.line == line
    else:
        assert ", line " not in message


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_problem_fails_at_the_right_stage(path: Path):
    """Static faults are caught without importing; import faults at import; the rest when called."""
    _, stage, _ = _expectation(path)
    assert stage in ("inspect", "import", "call")
    if stage == "inspect":
        with pytest.raises(ProblemError):
            inspect_problem(path)
        assert _module_name(path, "stage") not in sys.modules
        return
    inspect_problem(path)
    if stage == "import":
        with pytest.raises(ProblemError):
            _load(path, "stage")
        assert _module_name(path, "stage") not in sys.modules  # a failed import leaves nothing behind
    else:
        lp = _load(path, "stage")
        with pytest.raises(ProblemError):
            lp.init_inputs()
            lp.input_sets()


def test_bad_corpus_covers_the_required_faults():
    names = {p.stem for p in BAD}
    for needed in ("no_model", "model_is_function", "no_get_inputs", "syntax_error", "import_missing_module",
                   "get_inputs_raises", "get_inputs_not_list", "tolerance_not_literal"):
        assert needed in names


def test_relative_path_still_finds_the_line(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(PROBLEMS / "bad")
    with pytest.raises(ProblemError) as info:
        _load_everything(Path("get_inputs_raises.py"))
    assert re.match(r"problem file get_inputs_raises\.py, line \d+: get_inputs\(\) raised", str(info.value))


def test_missing_file_and_folder(tmp_path: Path):
    with pytest.raises(ProblemError, match="does not exist"):
        inspect_problem(tmp_path / "nope.py")
    with pytest.raises(ProblemError, match="is a folder"):
        inspect_problem(tmp_path)


def test_binary_file_is_named(tmp_path: Path):
    path = tmp_path / "op.py"
    path.write_bytes(b"\xff\xfe\x00junk")
    with pytest.raises(ProblemError, match="not UTF-8") as info:
        inspect_problem(path)
    assert str(path) in str(info.value)


def test_syntax_error_in_an_imported_helper_points_at_the_import(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "kernelagent_test_broken_helper.py").write_text("x = (\n")
    path = tmp_path / "op.py"
    path.write_text("import torch.nn as nn\nimport kernelagent_test_broken_helper\n\n"
                    "class Model(nn.Module):\n    pass\n\ndef get_inputs():\n    return []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ProblemError) as info:
        load_problem(path, module_name="kernelagent_test_broken_import")
    message = str(info.value)
    assert message.startswith(f"problem file {path}, line 2: importing it raised SyntaxError"), message
    _assert_one_paragraph(message)


def test_model_in_a_guarded_block_or_aliased_is_accepted(tmp_path: Path):
    path = tmp_path / "guarded.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n"
        "try:\n    class _Ref(nn.Module):\n        def forward(self, x):\n            return x + 1\n"
        "except ImportError:\n    raise\n\nModel = _Ref\n\n"
        "if True:\n    def get_inputs():\n        return [torch.zeros(3)]\n")
    lp = load_problem(path, module_name="kernelagent_test_guarded")
    (x,) = lp.input_sets()[0]
    assert torch.equal(lp.model_cls()(x), torch.ones(3))
    assert lp.init_inputs() == []


def test_tolerance_values_are_floats(tmp_path: Path):
    path = tmp_path / "tol.py"
    path.write_text("TOLERANCE = {'atol': 0, 'rtol': 1}\n"
                    "class Model:\n    pass\ndef get_inputs():\n    return []\n")
    tol = inspect_problem(path).tolerance
    assert tol == {"atol": 0.0, "rtol": 1.0} and all(type(v) is float for v in tol.values())


# ---------------------------------------------------------------- candidates


def _candidate(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "kernel.py"
    path.write_text(body)
    return path


MODEL_NEW = "\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"


def test_candidate_without_model_new(tmp_path: Path):
    path = _candidate(tmp_path, "import torch.nn as nn\n\nclass Model(nn.Module):\n    pass\n")
    with pytest.raises(ProblemError) as info:
        inspect_candidate(path)
    message = str(info.value)
    assert message.startswith(f"candidate file {path}: no `class ModelNew(nn.Module)`")
    _assert_one_paragraph(message)


def test_candidate_model_new_not_a_class(tmp_path: Path):
    path = _candidate(tmp_path, "import torch\n\n\ndef ModelNew():\n    return None\n")
    with pytest.raises(ProblemError, match=r"line 4: .*is not a class") as info:
        inspect_candidate(path)
    assert info.value.line == 4


def test_candidate_syntax_error_names_the_line(tmp_path: Path):
    path = _candidate(tmp_path, "import triton\n\nclass ModelNew(:\n    pass\n")
    with pytest.raises(ProblemError, match=rf"^candidate file {re.escape(str(path))}, line 3: syntax error"):
        inspect_candidate(path)


@pytest.mark.parametrize(("header", "backend"), [
    ("import torch\nimport triton\nimport triton.language as tl\n", "triton"),
    ("import torch\nfrom triton import language as tl\n", "triton"),
    ("import torch\nimport cutlass\nimport cutlass.cute as cute\n", "cute"),
    ("import torch\nfrom cutlass import cute\n", "cute"),
    ("import torch\nimport torch.nn as nn\n", "unknown"),
    # both imported: the decorated kernels decide
    ("import cutlass\nimport triton\n\n@triton.jit\ndef k(x_ptr):\n    pass\n", "triton"),
    ("import triton\nimport cutlass.cute as cute\n\n@cute.kernel\ndef k(x):\n    pass\n", "cute"),
])
def test_backend_detection(tmp_path: Path, header: str, backend: str):
    spec = inspect_candidate(_candidate(tmp_path, "import torch.nn as nn\n" + header + MODEL_NEW))
    assert spec.backend == backend
    assert "torch.nn" in spec.imports
    assert spec.sha256 == sha256_text(spec.source)


class _Ref(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.n = n

    def forward(self, x, y):
        return x + y * self.n


def _init_n(self, n):
    nn.Module.__init__(self)


def _init_nm(self, n, m):
    nn.Module.__init__(self)


def _new(forward, init=_init_n) -> type:
    """A ModelNew class built from the given forward (and __init__) functions."""
    return type("ModelNew", (nn.Module,), {"__init__": init, "forward": forward})


@pytest.mark.parametrize("forward", [
    lambda self, x: x,
    lambda self, x, y, z: x,
    lambda self, x, y, *, block: x,
], ids=["fewer", "more", "required_kwonly"])
def test_signature_mismatch_reports_different_forward(forward):
    message = signature_mismatch(_Ref, _new(forward))
    assert message is not None
    assert message.startswith("ModelNew.forward(self, x") and "Model.forward(self, x, y)" in message
    _assert_one_paragraph(message)


@pytest.mark.parametrize("forward", [
    lambda self, x, y: x,
    lambda self, a, b: a,
    lambda self, x, y, block=128: x,
    lambda self, x, y=None: x,
    lambda self, *args: args[0],
    lambda self, x, *rest, **kw: x,
], ids=["same", "renamed", "extra_optional", "optional_y", "varargs", "varargs_and_kwargs"])
def test_signature_mismatch_accepts_compatible_forward(forward):
    assert signature_mismatch(_Ref, _new(forward)) is None


def test_signature_mismatch_checks_the_constructor():
    message = signature_mismatch(_Ref, _new(lambda self, x, y: x, _init_nm))
    assert message is not None and message.startswith("ModelNew.__init__(self, n, m)")


def test_signature_mismatch_missing_constructor():
    """ModelNew without __init__ cannot take the reference's constructor arguments."""
    class NoInit(nn.Module):
        def forward(self, x, y):
            return x

    message = signature_mismatch(_Ref, NoInit)
    assert message is not None and "__init__" in message
    assert signature_mismatch(NoInit, NoInit) is None


def test_signature_mismatch_reference_with_varargs_and_defaults():
    class Star(nn.Module):
        def forward(self, *inputs):
            return inputs[0]

    class WithDim(nn.Module):
        def forward(self, x, dim=1):
            return x

    class Two(nn.Module):
        def forward(self, a, b):
            return a

    class One(nn.Module):
        def forward(self, x):
            return x

    class OneOrTwo(nn.Module):
        def forward(self, a, b=2):
            return a

    assert signature_mismatch(Star, Two) is None
    assert signature_mismatch(WithDim, OneOrTwo) is None
    assert signature_mismatch(WithDim, One) is not None  # get_inputs() may pass dim
    assert signature_mismatch(WithDim, Two) is not None  # get_inputs() may leave dim out
