"""The ahead-of-time compile finds the kernel the interpreter launched, and only that one: by qualified name
and line, at module level or in a module-level class, and not a factory's kernel of the same name."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("triton")

from kernelagent.verifier.worker.aot import find_kernel  # noqa: E402
from kernelagent.verifier.worker.compile_facts import aot_requests, describe_arg  # noqa: E402

SOURCE = textwrap.dedent('''
    import triton
    import triton.language as tl


    @triton.jit
    def kern(x_ptr, n, BLOCK: tl.constexpr):
        tl.store(x_ptr + tl.arange(0, BLOCK), 0.0)


    def _body(x_ptr, n, BLOCK: tl.constexpr):
        tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)


    called = triton.jit(_body)


    class Kernels:
        @staticmethod
        @triton.jit
        def inside(x_ptr, n, BLOCK: tl.constexpr):
            tl.store(x_ptr + tl.arange(0, BLOCK), 2.0)


    def make():
        @triton.jit
        def kern(x_ptr, n, BLOCK: tl.constexpr):
            tl.store(x_ptr + tl.arange(0, BLOCK), 3.0)
        return kern


    made = make()
''')


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = Path(tmp_path_factory.mktemp("aot")) / "cand_mod.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("cand_mod", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["cand_mod"] = mod
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop("cand_mod", None)


def _launch(fn) -> dict:
    raw = getattr(fn, "fn", fn)
    return {"kernel": raw.__name__, "qualname": raw.__qualname__, "line": raw.__code__.co_firstlineno}


def test_module_level_call_form_and_class_kernels_are_found(module):
    assert find_kernel(module, _launch(module.kern)) is module.kern
    assert find_kernel(module, _launch(module.called)) is module.called
    assert find_kernel(module, _launch(module.Kernels.inside)) is module.Kernels.inside


def test_a_factory_kernel_is_not_taken_for_the_module_kernel_of_the_same_name(module):
    launch = _launch(module.made)
    assert launch["kernel"] == "kern" and "<locals>" in launch["qualname"]
    assert find_kernel(module, launch) is None
    shadow = {**_launch(module.kern), "line": launch["line"]}  # the right name, another definition
    assert find_kernel(module, shadow) is None


def test_two_kernels_of_one_name_are_two_compiles(module):
    args = {"x_ptr": {"kind": "ptr", "dtype": "fp32", "attr": ""}, "BLOCK": {"kind": "const", "value": 16}}
    reqs = [{**_launch(k), "args": args, "options": {}} for k in (module.kern, module.made, module.kern)]
    assert len(aot_requests(reqs)) == 2


def test_numpy_integers_launch_as_integers():
    np = pytest.importorskip("numpy")
    assert describe_arg(np.int64(7))["kind"] in ("int", "const")
    assert describe_arg(np.int64(7))["value"] == 7


def test_a_dtype_constexpr_is_rebuilt_and_an_opaque_one_is_not_compiled():
    # the compile must build the kernel the interpreter ran: a constexpr branch on a stand-in value (None) compiled
    # another one (red-team review, 2026-12-03: NumPy in the branch taken, a copy in the branch compiled)
    import triton.language as tl

    from kernelagent.verifier.worker.aot import _signature

    class Param:
        def __init__(self, name: str):
            self.name, self.is_constexpr, self.has_default = name, True, False

    fn = type("Fn", (), {"params": [Param("OUT")]})()
    assert describe_arg(tl.bfloat16) == {"kind": "dtype", "value": "bf16"}
    signature, constexprs, _ = _signature(fn, {"OUT": describe_arg(tl.bfloat16)})
    assert signature == {"OUT": "constexpr"} and constexprs["OUT"] == tl.bfloat16
    with pytest.raises(TypeError, match="cannot be rebuilt|not a value"):
        _signature(fn, {"OUT": describe_arg(object())})
    with pytest.raises(TypeError):
        _signature(fn, {"OUT": {"kind": "dtype", "value": "pointer<fp32>"}})


class _Tag(int):
    """A launch argument of the candidate's own type whose copy hooks are candidate code."""

    def __deepcopy__(self, memo):
        raise RuntimeError("candidate code ran in the verifier's copy")

    def __copy__(self):
        raise RuntimeError("candidate code ran in the verifier's copy")


class _Name(str):
    def __deepcopy__(self, memo):
        raise RuntimeError("candidate code ran in the verifier's copy")


def test_descriptions_hold_exact_builtins_only():
    """Facts are deep-copied when serialised: a subclass's __deepcopy__ must never run there (red team,
    2026-12-03: it raised, and the verdict was blamed on the verifier)."""
    import copy

    for value in (_Tag(5), (_Tag(1), _Name("x")), _Name("relu")):
        desc = describe_arg(value)
        copied = copy.deepcopy(desc)  # would raise if a candidate object were inside
        leaves = [copied.get("value")] if not isinstance(copied.get("value"), list) else copied["value"]
        assert all(type(v) in (int, str, float, bool) for v in leaves), desc
    assert describe_arg(_Tag(5))["value"] == 5 and describe_arg((_Tag(1), _Name("x")))["value"] == [1, "x"]


def _depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def test_deeply_nested_arguments_are_described_as_opaque():
    """A tuple constexpr nested 450 deep overflowed the recursion that serialises the worker's facts, and the
    verdict blamed the verifier (red team, 2026-12-05): past a few levels the description is opaque (which the
    AOT compile refuses), and stays far inside the depth the parent accepts."""
    import dataclasses

    import torch

    from kernelagent.verifier.api import MAX_AOT_DEPTH

    nest: object = (torch.float32,)
    ints: object = (1,)
    for _ in range(450):
        nest, ints = (nest,), (ints,)
    for value in (nest, ints):
        desc = describe_arg(value)
        assert _depth(desc) < MAX_AOT_DEPTH and "other" in repr(desc), _depth(desc)

    @dataclasses.dataclass
    class Facts:
        requests: list

    dataclasses.asdict(Facts([describe_arg(nest)]))  # what the worker serialises: no RecursionError
    assert describe_arg(((1, 2), (3,))) == {"kind": "const", "value": [[1, 2], [3]]}  # shallow ones as before
