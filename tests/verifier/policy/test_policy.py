"""Static policy: the cheat corpus must be caught under the named rule, the honest corpus must pass,
and the pieces (name resolution, call graph, tensor tracking) must behave on small sources."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

from kernelagent.verifier.policy.check import RULES, Finding, PolicyResult, check_policy
from kernelagent.verifier.policy.graph import CallGraph
from kernelagent.verifier.policy.names import Resolver
from kernelagent.verifier.policy.scopes import build_module
from tests.paths import HONEST as HONEST_DIR
from tests.paths import WRONG

CHEATS = sorted((WRONG / "static").glob("*.py"))
HONEST = sorted((HONEST_DIR / "static").glob("*.py"))
_EXPECT = re.compile(r"^# expect: (\w+)", re.MULTILINE)


def _expected_rule(path: Path) -> str:
    match = _EXPECT.match(path.read_text())
    assert match, f"{path.name} must start with '# expect: <rule>'"
    return match.group(1)


def _check(src: str) -> PolicyResult:
    return check_policy(textwrap.dedent(src))


# --------------------------------------------------------------------------------------- corpus


def test_corpus_sizes():
    assert len(CHEATS) >= 25
    triton = [p for p in HONEST if "@triton.jit" in p.read_text()]
    cute = [p for p in HONEST if "cutlass.cute" in p.read_text()]
    assert len(triton) >= 8 and len(cute) >= 2


@pytest.mark.parametrize("path", CHEATS, ids=lambda p: p.stem)
def test_cheat_is_caught_under_its_rule(path: Path):
    rule = _expected_rule(path)
    assert rule in RULES, f"unknown rule {rule!r} in {path.name}"
    result = check_policy(path.read_text(), path.name)
    assert not result.ok
    assert rule in {f.rule for f in result.findings}, result.summary()


@pytest.mark.parametrize("path", HONEST, ids=lambda p: p.stem)
def test_honest_candidate_passes(path: Path):
    result = check_policy(path.read_text(), path.name)
    assert result.ok, result.summary()
    assert result.violations == [] and result.suspects == []


# -------------------------------------------------------------------------------- result object


def test_finding_fields_and_summary():
    result = _check("""
        import torch
        import torch.nn as nn

        class ModelNew(nn.Module):
            def forward(self, x):
                return torch.softmax(x, dim=-1)
    """)
    assert not result.ok
    (finding,) = result.findings
    assert isinstance(finding, Finding)
    assert (finding.rule, finding.severity, finding.line) == ("torch_compute", "violation", 7)
    assert finding.snippet == "return torch.softmax(x, dim=-1)"
    assert "torch.softmax" in finding.message and finding.hint
    assert result.violations == [finding] and result.suspects == []
    assert result.summary().startswith("line 7 [torch_compute] `torch.softmax(...)`")
    assert result.summary().endswith(finding.hint)


def test_reading_torch_flags_in_the_forward_is_not_compute():
    """Queries of torch's global modes (deterministic algorithms, grad mode) return a bool: a forward may branch
    on them; a compute call beside them is still a violation."""
    src = """
        import torch
        import torch.nn as nn

        class ModelNew(nn.Module):
            def forward(self, x):
                if torch.are_deterministic_algorithms_enabled() or torch.is_grad_enabled():
                    return x.clone()
                return {tail}
    """
    assert _check(src.format(tail="x.clone()")).ok
    flagged = _check(src.format(tail="torch.exp(x)"))
    assert [(f.rule, f.line) for f in flagged.findings] == [("torch_compute", 9)]


def test_suspect_rejects_but_is_not_a_violation():
    result = _check("""
        import torch
        import torch.nn as nn

        class ModelNew(nn.Module):
            def __init__(self, name):
                super().__init__()
                self.name = name

            def forward(self, x):
                return getattr(torch, self.name)(x)
    """)
    assert not result.ok
    assert result.violations == []
    assert [f.rule for f in result.suspects] == ["dynamic_attr"]
    assert "unverifiable" in result.summary()


def test_syntax_error_is_a_single_violation():
    result = check_policy("def forward(self, x:\n    return x\n")
    assert [(f.rule, f.severity) for f in result.findings] == [("syntax", "violation")]
    assert result.findings[0].line >= 1


def test_snippets_are_short_and_messages_do_not_describe_the_checker():
    long_line = "import torch\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" \
                "        return torch.softmax(x + " + " + ".join(["x"] * 80) + ", -1)\n"
    findings = check_policy(long_line).findings
    every = findings + [f for p in CHEATS for f in check_policy(p.read_text()).findings]
    assert every
    for f in every:
        assert len(f.snippet) <= 160
        text = f"{f.message} {f.hint}".lower()
        for word in ("ast", "regex", "static", "resolv", "alias", "call graph", "heuristic"):
            assert not re.search(rf"\b{word}", text), (word, f)


def test_a_300_line_file_of_honest_kernels_is_checked_whole():
    """Behaviour only: how fast the check runs is measured in benchmarks/policy_speed.py, not asserted."""
    parts, lines = [], 0
    for path in HONEST:
        text = path.read_text()
        parts.append(text)
        lines += text.count("\n")
        if lines >= 300:
            break
    source = "\n".join(parts)
    assert source.count("\n") >= 300
    result = check_policy(source)
    assert result.ok, result.summary()


# ------------------------------------------------------------------------------ name resolution


def _resolve_last(src: str) -> set[str]:
    """Qualified names the expression on the last line of `src` may stand for."""
    tree = ast.parse(textwrap.dedent(src))
    info = build_module(tree)
    resolver = Resolver(info)
    CallGraph(info, resolver)
    expr = tree.body[-1]
    assert isinstance(expr, ast.Expr)
    return {v.name for v in resolver.resolve(expr.value, info.scope) if v.kind == "ref"}


@pytest.mark.parametrize(("src", "expected"), [
    ("import torch as t\nt.softmax", "torch.softmax"),
    ("from torch import nn as q\nq.functional.softmax", "torch.nn.functional.softmax"),
    ("from torch.nn import functional as F\nF.softmax", "torch.nn.functional.softmax"),
    ("import torch.nn.functional as F\nF.gelu", "torch.nn.functional.gelu"),
    ("import torch.nn\ntorch.nn.functional.relu", "torch.nn.functional.relu"),
    ("import torch\nsm = torch.softmax\nalias = sm\nalias", "torch.softmax"),
    ("import torch\ngetattr(torch, 'soft' + 'max')", "torch.softmax"),
    ("import torch\nn = 'max'\ngetattr(torch, f'soft{n}')", "torch.softmax"),
    ("import torch\ngetattr(torch, 'xamtfos'[::-1])", "torch.softmax"),
    ("import torch\ngetattr(torch, ''.join(map(chr, [109, 109])))", "torch.mm"),
    ("import torch\ngetattr(torch, '{}{}'.format('ma', 'tmul'))", "torch.matmul"),
    ("__import__('to' + 'rch').matmul", "torch.matmul"),
    ("import importlib\nimportlib.import_module('torch.nn.functional').softmax", "torch.nn.functional.softmax"),
    ("import torch\nvars(torch)['soft' + 'max']", "torch.softmax"),
    ("import torch\ntorch.__dict__['softmax']", "torch.softmax"),
    ("import sys\nsys.modules['torch'].softmax", "torch.softmax"),
    ("import functools, torch\nfunctools.partial(torch.softmax, dim=-1)", "torch.softmax"),
    ("import torch\nOPS = {'a': torch.exp}\nOPS['a']", "torch.exp"),
    ("import torch\ndef pick():\n    return torch.tanh\npick()", "torch.tanh"),
    ("import torch\nclass C:\n    f = staticmethod(torch.sin)\nC.f", "torch.sin"),
])
def test_alias_resolution(src: str, expected: str):
    assert expected in _resolve_last(src)


def test_names_that_are_not_constant_do_not_resolve():
    names = _resolve_last("import torch\ndef f(name):\n    return getattr(torch, name)\nf('x')")
    assert not {n for n in names if n.startswith("torch")}


# ----------------------------------------------------------------------------------- call graph

_GRAPH_SRC = """
import torch
import torch.nn as nn

def hop2(x):
    return x

def hop1(x):
    return hop2(x)

def never_called(x):
    return torch.softmax(x, -1)

class Helper:
    def run(self, x):
        return x

class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.helper = Helper()
        self.prep = torch.randn(3).softmax(0)  # weight preparation, not on the path

    def forward(self, x):
        grid = lambda meta: (1,)
        return Fn.apply(self.helper.run(hop1(x)))
"""


def _path_names(src: str) -> set[str]:
    tree = ast.parse(textwrap.dedent(src))
    info = build_module(tree)
    graph = CallGraph(info, Resolver(info))
    return {info.funcs[node].name for node in graph.path}


def test_call_graph_reaches_through_two_hops_and_other_classes():
    names = _path_names(_GRAPH_SRC)
    assert {"ModelNew.forward", "hop1", "hop2", "Helper.run", "Fn.forward", "Fn.backward"} <= names
    assert any(n.startswith("<lambda") for n in names)


def test_call_graph_leaves_out_what_forward_never_calls():
    names = _path_names(_GRAPH_SRC)
    assert "never_called" not in names
    assert "ModelNew.__init__" not in names


def test_torch_only_outside_the_forward_path_is_allowed():
    assert check_policy(textwrap.dedent(_GRAPH_SRC)).ok


def test_compute_two_hops_from_forward_is_reported_where_it_happens():
    src = _GRAPH_SRC.replace("def hop2(x):\n    return x", "def hop2(x):\n    return x.exp()")
    result = check_policy(textwrap.dedent(src))
    assert [(f.rule, f.line) for f in result.findings] == [("torch_compute", 6)]


# ------------------------------------------------------------------------ forward-path details


def test_shape_arithmetic_and_launch_setup_are_not_compute():
    result = _check("""
        import math
        import torch
        import torch.nn as nn
        import triton
        import triton.language as tl

        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

        class ModelNew(nn.Module):
            def forward(self, x, dim: int = -1):
                rows = x.shape[0] * 2 // 2
                n = x.numel()
                block = min(1024, triton.next_power_of_2(x.size(-1)))
                scale = 1.0 / math.sqrt(x.shape[-1])
                if x.dtype == torch.float16 and x.is_contiguous() and dim < 0:
                    pass
                y = torch.empty_like(x).view(rows, -1)
                stream = torch.cuda.current_stream() if x.is_cuda else None
                k[(triton.cdiv(n, block),)](y, n, BLOCK=block)
                return y.view(x.shape)
    """)
    assert result.ok, result.summary()


def test_tensor_arithmetic_in_a_helper_is_caught_through_its_arguments():
    src = """
        import torch.nn as nn

        def scale(t, factor):
            return t * factor

        def count(n):
            return n * 2

        class ModelNew(nn.Module):
            def forward(self, x):
                m = count(x.shape[0])
                return scale(x, m)
    """
    result = _check(src)
    assert [(f.rule, f.line) for f in result.findings] == [("torch_compute", 5)]


def test_try_elsewhere_is_fine_but_not_around_the_kernel():
    base = """
        import torch
        import torch.nn as nn
        import triton
        import triton.language as tl

        try:
            import einops
        except ImportError:
            einops = None

        @triton.jit
        def k(x_ptr):
            pass

        def sm_count(dev):
            try:
                return torch.cuda.get_device_properties(dev).multi_processor_count
            except RuntimeError:
                return 132

        class ModelNew(nn.Module):
            def forward(self, x):
                n = sm_count(x.device)
                {launch}
                return x
    """
    plain = _check(base.format(launch="k[(n,)](x)"))
    assert plain.ok, plain.summary()
    guarded = _check(base.format(launch="try:\n                    k[(n,)](x)\n"
                                        "                except Exception:\n                    pass"))
    assert [f.rule for f in guarded.findings] == ["try_around_kernel"]
    reraised = _check(base.format(launch="try:\n                    k[(n,)](x)\n"
                                         "                except Exception as e:\n"
                                         "                    raise RuntimeError('launch failed') from e"))
    assert reraised.ok, reraised.summary()


def test_module_level_torch_and_init_compute_are_allowed():
    result = _check("""
        import torch
        import torch.nn as nn

        TABLE = torch.arange(16).float().exp()

        class ModelNew(nn.Module):
            def __init__(self, n):
                super().__init__()
                w = torch.randn(n, n)
                self.register_buffer("w_t", (w @ w.t()).contiguous())

            def forward(self, x):
                out = torch.empty_like(x)
                return out
    """)
    assert result.ok, result.summary()


def test_attributes_of_own_objects_may_be_set_but_not_of_libraries():
    ok = _check("""
        import torch
        import torch.nn as nn

        class Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.n = x.shape[0]
                return torch.empty_like(x)

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.cache = {}

            def forward(self, x):
                return Fn.apply(x)

        ModelNew.version = 2
    """)
    assert ok.ok, ok.summary()
    patched = _check("import torch.nn.functional as F\nF.softmax = lambda x, dim: x\n")
    assert [f.rule for f in patched.findings] == ["monkey_patch"]


def test_imports_outside_the_allowed_list_name_the_module():
    result = _check("import random\nimport math\nfrom typing import Optional\nimport os\n")
    assert [(f.rule, f.line) for f in result.findings] == [("forbidden_import", 1)]
    assert "'random'" in result.findings[0].message


def test_built_names_are_reported_with_what_they_build():
    result = _check("""
        import os
        getattr(os, "sys" + "tem")("true")
    """)
    assert "subprocess" in {f.rule for f in result.findings}
    assert any("built from strings" in f.message for f in result.findings)


def test_a_main_block_is_skipped_unless_the_file_rebinds_its_name():
    body = """
        import torch
        import torch.nn as nn

        class ModelNew(nn.Module):
            def forward(self, x):
                return torch.empty_like(x)

        if __name__ == "__main__":
            import time
            print(torch.softmax(torch.randn(3), -1), time.time())
    """
    assert _check(body).ok
    rebound = _check(body.replace("class ModelNew", "__name__ = '__main__'\n\n        class ModelNew"))
    assert "forbidden_import" in {f.rule for f in rebound.findings}


def test_library_style_custom_ops_with_a_computed_name_pass():
    result = _check("""
        import torch
        import torch.nn as nn
        import triton
        import triton.language as tl

        @triton.jit
        def _k(x_ptr, n):
            pass

        def _impl(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            _k[(1,)](y, y.numel())
            return y

        def _register(name, impl):
            if hasattr(torch.ops.mylib, name):
                return getattr(torch.ops.mylib, name)
            return torch.library.custom_op(f"mylib::{name}", impl, mutates_args=())

        op = _register("copy", _impl)

        class ModelNew(nn.Module):
            def forward(self, x):
                return op(x)
    """)
    assert result.ok, result.summary()
    aten = _check("import torch\ndef reg(name, impl):\n    torch.library.custom_op(f'aten::{name}', impl)\n")
    assert [f.rule for f in aten.findings] == ["monkey_patch"]


def test_every_rule_has_a_description_and_a_hint():
    from kernelagent.verifier.policy.check import RULE_DESCRIPTIONS

    assert set(RULE_DESCRIPTIONS) == set(RULES)
    found = {f.rule for p in CHEATS for f in check_policy(p.read_text()).findings}
    assert found <= set(RULES)
    assert set(RULES) - found <= {"syntax"}, "every rule should have a cheat in the corpus"


def test_parameters_the_reference_fills_with_tensors_are_tensors_whatever_their_annotation():
    # red-team review (2026-12-03): `x: int` (or a constant default) made the policy take the input for a
    # number, so NumPy on it passed; the second check, with the reference's inputs known, refuses it
    src = textwrap.dedent('''
        import numpy as np
        import torch.nn as nn

        class ModelNew(nn.Module):
            def forward(self, x: int, y=0, mode: str = "a"):
                a = np.asarray(x)
                b = np.asarray(y)
                return a + b if mode == "a" else a
    ''')
    assert check_policy(src).ok  # nothing says x and y hold tensors
    assert check_policy(src, entry_tensors=frozenset()).ok  # the reference passes no tensor there either
    assert {(f.rule, f.line) for f in check_policy(src, entry_tensors=frozenset({0})).findings} == {
        ("torch_compute", 7)}
    assert {f.line for f in check_policy(src, entry_tensors=frozenset({0, 1})).findings} == {7, 8}


@pytest.mark.parametrize("entry", [
    "def __call__(self, x: int):\n        return np.asarray(x)",
    "forward = _impl",
])
def test_every_entry_of_the_model_is_seeded_from_the_reference(entry):
    # a review of the fix above: __call__ annotated `int`, and a module function bound as forward whose
    # first parameter is not named self (position 0 is the instance whatever its name)
    src = textwrap.dedent('''
        import numpy as np
        import torch.nn as nn

        def _impl(me, x: int):
            return np.asarray(x)

        class ModelNew(nn.Module):
            ENTRY
    ''').replace("ENTRY", entry)
    assert check_policy(src).ok
    assert {f.rule for f in check_policy(src, entry_tensors=frozenset({0})).findings} == {"torch_compute"}
