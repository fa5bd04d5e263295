"""Canonical names: a name is judged by what it denotes, whichever allowed module re-exports it, and
the lookups never run library code, import the candidate or load what a rule bans."""

from __future__ import annotations

import ast
import sys
import textwrap
import warnings

import pytest

from kernelagent.verifier.policy import canon
from kernelagent.verifier.policy.canon import canonical, canonical_name, is_private, module_of
from kernelagent.verifier.policy.check import check_policy
from kernelagent.verifier.policy.graph import CallGraph
from kernelagent.verifier.policy.names import Resolver
from kernelagent.verifier.policy.scopes import build_module


@pytest.mark.parametrize(("written", "denotes"), [
    ("torch.cuda.os.getcwd", "os.getcwd"),                      # a module another module imported
    ("torch.types.os.path.join", "os.path.join"),               # os.path is posixpath: named by its public face
    ("torch.cuda.memory.sys.modules", "sys.modules"),
    ("dataclasses.builtins.exec", "builtins.exec"),
    ("enum.bltns.compile", "builtins.compile"),                 # re-exported under another name
    ("torch.nn.functional.torch.softmax", "torch.softmax"),     # the last module reached decides
    ("torch.nn.functional.np.asarray", "numpy.asarray"),
    ("torch.cpp", "torch._C.cpp"),                              # a public-looking name for private bindings
    ("torch.nn.functional.softmax", "torch.nn.functional.softmax"),  # ordinary names are unchanged
    ("torch.empty().view().contiguous", "torch.empty().view().contiguous"),
    ("triton.language.program_id", "triton.language.program_id"),
    ("sys.executable", "sys.executable"),                       # values (a str, a float) are not modules
    ("os.sep", "os.sep"),
    ("math.pi", "math.pi"),
])
def test_canonical_names(written: str, denotes: str):
    assert canonical_name(written) == denotes


@pytest.mark.parametrize(("written", "home"), [
    ("functools.RLock", "_thread.RLock"),
    ("torch.nn.modules.module.is_traceable_wrapper_subclass",
     "torch.utils._python_dispatch.is_traceable_wrapper_subclass"),
    ("torch.nn.functional.avg_pool2d", "torch._C._nn.avg_pool2d"),
])
def test_functions_and_classes_keep_their_home(written: str, home: str):
    assert canonical(written).home == home


def test_no_home_when_the_object_lives_where_it_was_read():
    assert canonical("torch.nn.functional.gelu").name == "torch.nn.functional.gelu"
    assert canonical("math.sqrt").home is None
    assert canonical("torch.os").home is None  # modules have names, not homes


def test_c_modules_are_named_by_their_public_module():
    assert module_of("posix") == "os"
    assert module_of("posixpath") == "os.path"
    assert module_of("_io.FileIO") == "io.FileIO"
    assert module_of("torch.nn") == "torch.nn"


def test_private_parts():
    assert is_private("_C") and is_private("_python_dispatch")
    assert not is_private("__version__") and not is_private("softmax")


def test_where_nothing_can_be_looked_up_a_sensitive_module_name_restarts_the_name():
    assert canonical_name("not_a_real_package.helpers.os.system") == "os.system"
    assert canonical_name("not_a_real_package.helpers.runtime") == "not_a_real_package.helpers.runtime"


def test_lookups_do_not_run_module_getattr():
    # torch.set_vital is served by torch's module __getattr__, which warns when it runs
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert canonical_name("torch.set_vital") == "torch.set_vital"


def test_private_and_banned_submodules_are_never_imported():
    assert not canon._may_import("torch._dynamo")
    assert not canon._may_import("numpy.ctypeslib")
    assert canon._may_import("numpy.random")
    before = {m for m in ("torch._lazy", "numpy.ctypeslib") if m in sys.modules}
    assert canonical_name("torch._lazy.mark_step") == "torch._lazy.mark_step"
    assert canonical_name("numpy.ctypeslib.load_library") == "numpy.ctypeslib.load_library"
    assert {m for m in ("torch._lazy", "numpy.ctypeslib") if m in sys.modules} == before


def test_lookups_are_memoised():
    canonical.cache_clear()
    source = (HONEST_LIKE * 3)
    check_policy(source)
    first = canonical.cache_info()
    check_policy(source)
    second = canonical.cache_info()
    assert first.misses > 0
    assert second.misses == first.misses and second.hits > first.hits


HONEST_LIKE = """
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

@triton.jit
def _k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(F.normalize(torch.randn(4), dim=0) / math.sqrt(4))

    def forward(self, x):
        y = torch.empty_like(x)
        _k[(triton.cdiv(x.numel(), 256),)](y, x.numel(), BLOCK=256)
        return y
"""


# ------------------------------------------------------------------------------ through the resolver


def _refs_of_last(src: str) -> set[str]:
    tree = ast.parse(textwrap.dedent(src))
    info = build_module(tree)
    resolver = Resolver(info)
    CallGraph(info, resolver)
    expr = tree.body[-1]
    assert isinstance(expr, ast.Expr)
    return {v.name for v in resolver.resolve(expr.value, info.scope) if v.kind == "ref"}


@pytest.mark.parametrize(("src", "expected"), [
    ("from torch.cuda import os as o\no.kill", "os.kill"),
    ("import typing\nT = {'k': typing}\nT['k'].sys.modules", "sys.modules"),
    ("import torch\ngetattr(getattr(torch, 'cu' + 'da'), 'so'[::-1])", "os"),
    ("import torch\nPARTS = ('o', 's')\ngetattr(torch.cuda, ''.join(PARTS))", "os"),
    ("import torch\ntorch.cuda.__dict__['o' + 's'].fork", "os.fork"),
    ("import operator, torch\noperator.attrgetter('cuda.memory.sys')(torch)", "sys"),
    ("import warnings\nwarnings.sys.modules['builtins'].eval", "builtins.eval"),
    ("import torch\ndef f(m):\n    return m.cuda.os\nf(torch).system", "os.system"),
    ("import torch\ndef g(m):\n    return m\ndef f(m):\n    return g(m).os\nf(torch.cuda).getenv", "os.getenv"),
    ("import functools, torch\ndef f(m, name):\n    return m\np = functools.partial(f, torch.types)\np('x').os",
     "os"),
    ("import torch\nclass C:\n    def __init__(self, lib):\n        self.lib = lib\nC(torch.cuda).lib.os", "os"),
    ("import torch\nclass C:\n    @property\n    def lib(self):\n        return torch.cuda\nC().lib.os", "os"),
    ("import torch\nd = {'k': torch.cuda}\nd.get('k').os", "os"),
    ("import torch\nnext(m for m in [torch.cuda]).os", "os"),
    ("import torch\n[m for m in (torch.cuda,)][0].os", "os"),
    ("import torch\ngetattr(torch, 'missing', torch.cuda).os", "os"),
    ("import torch\n(lambda *a: a[0])(torch.cuda).os", "os"),
    ("import torch\ndef f(**kw):\n    return kw['m']\nf(m=torch.cuda).os", "os"),
    ("import torch\nmatch torch.cuda:\n    case m:\n        pass\nm.os", "os"),
    ("import torch\ndef o():\n    m = 0\n    def i():\n        nonlocal m\n        m = torch.cuda\n"
     "    return m\no().os", "os"),
])
def test_resolver_names_are_canonical(src: str, expected: str):
    assert expected in _refs_of_last(src)


def test_type_of_own_instance_is_own_class():
    tree = ast.parse("class A:\n    def m(self):\n        return type(self)\n")
    info = build_module(tree)
    resolver = Resolver(info)
    ret = next(n for n in ast.walk(tree) if isinstance(n, ast.Return))
    func = next(f for f in info.funcs.values() if f.name == "A.m")
    assert {v.kind for v in resolver.resolve(ret.value, func.scope)} == {"class"}


def test_values_growing_round_a_recursive_helper_stop_and_are_reported():
    src = textwrap.dedent("""
        import torch
        def walk(m, n):
            return walk(m.sub, n - 1) if n else m
        walk(torch, 3)
    """)
    result = check_policy(src)
    assert "dynamic_attr" in result.rules()


# ------------------------------------------------------------------------- rules on canonical names


def _rules(src: str) -> set[str]:
    return check_policy(textwrap.dedent(src)).rules()


@pytest.mark.parametrize(("src", "rule"), [
    ("import torch\ntorch.cuda.os.kill(0, 0)", "subprocess"),
    ("import torch\ntorch.cuda.threading.Thread", "threads"),
    ("import contextlib\ncontextlib.os.environ", "env_access"),
    ("import torch\ntorch.library.inspect.currentframe()", "introspection"),
    ("import functools\nfunctools.RLock()", "threads"),
    ("import torch\ntorch.cpp", "introspection"),
    ("from torch import textwrap", "forbidden_import"),
    ("import typing\ntyping.stdlib_re.compile('x')", "forbidden_import"),
    ("import dataclasses\ndataclasses._create_fn", "introspection"),
    ("from torch.cuda import os", None),  # the os module itself is allowed; its attributes are judged
    ("import torch\ntorch.nn.functional.torch.empty(3)", None),
])
def test_rules_apply_to_what_a_name_denotes(src: str, rule: str | None):
    rules = _rules(src)
    assert rule in rules if rule else not rules, rules


@pytest.mark.parametrize("attr", [
    "__self__", "__func__", "__globals__", "gi_frame", "cr_frame", "ag_frame", "tb_frame", "f_back", "co_consts",
    "co_filename", "__reduce_ex__", "__subclasses__", "__mro__", "mro", "__base__", "__traceback__",
])
def test_introspection_attributes_on_any_receiver(attr: str):
    assert "introspection" in _rules(f"def f(obj):\n    return obj.{attr}\n")
    assert "introspection" in _rules(f"def f(obj):\n    return getattr(obj, '{attr[:2]}' + '{attr[2:]}')\n")


@pytest.mark.parametrize("attr", ["__name__", "__qualname__", "__module__", "__doc__", "shape"])
def test_harmless_attributes_pass(attr: str):
    assert not _rules(f"def f(obj):\n    return obj.{attr}\n")


@pytest.mark.parametrize("expr", ["obj.__class__", "type(obj)", "[type(obj)][0]", "(c := obj.__class__)"])
def test_the_class_of_an_outside_object_kept_or_called_is_introspection(expr: str):
    """Kept, the class makes what no name shows: type(torch.cuda.current_stream())() is a stream (red-team
    reviews 2 and 3, 2026-12-02)."""
    assert "introspection" in _rules(f"def f(obj):\n    return {expr}\n")


@pytest.mark.parametrize("expr", ["type(obj) is int", "obj.__class__ == float", "type(obj).__name__",
                                  "isinstance(obj, type(obj))", "obj.__class__.__qualname__"])
def test_the_class_of_an_outside_object_compared_or_named_passes(expr: str):
    assert not _rules(f"def f(obj):\n    return {expr}\n")


@pytest.mark.parametrize("name", ["__loader__", "__spec__", "__builtins__", "__build_class__"])
def test_module_globals_that_expose_the_interpreter(name: str):
    assert "introspection" in _rules(f"x = {name}\n")


def test_namespace_dicts_of_outside_objects():
    assert "introspection" in _rules("import torch\nns = torch.cuda.__dict__\n")
    assert "introspection" in _rules("def f(o):\n    return o.__dict__\n")
    assert not _rules("class A:\n    def f(self):\n        return self.__dict__\n")


def test_getattr_handed_to_other_code_is_suspect_but_an_alias_is_followed():
    result = check_policy("import functools, torch\nfunctools.reduce(getattr, ['nn'], torch)\n")
    assert [(f.rule, f.severity) for f in result.findings] == [("dynamic_attr", "suspect")]
    assert _rules("import torch\ng = getattr\ng(torch, 'o' + 's').system('true')\n") == {"subprocess"}


def test_patching_classes_of_other_objects():
    assert "monkey_patch" in _rules("def f(x):\n    type(x).add = None\n")
    assert "monkey_patch" in _rules("def f(x):\n    setattr(x.__class__, 'add', None)\n")
    assert not _rules("class A:\n    def f(self):\n        type(self).count = 1\n        self.__class__.n = 2\n")


def test_helper_parameters_carry_modules_into_patches():
    assert "monkey_patch" in _rules("import torch\ndef p(m):\n    m.softmax = None\np(torch.nn.functional)\n")


def test_registered_implementations_count_only_when_forward_runs_an_operator():
    base = """
        import torch
        import torch.nn as nn
        import triton
        import triton.language as tl

        @triton.jit
        def _k(x_ptr):
            pass

        def _impl(x):
            if x.is_cuda:
                y = torch.empty_like(x)
                _k[(1,)](y)
                return y
            return torch.softmax(x, -1)

        def _register(name, fn):
            return torch.library.custom_op(f"demo::{name}", fn, mutates_args=())

        op = _register("sm", _impl)

        class ModelNew(nn.Module):
            def forward(self, x):
                {body}
    """
    unused = _rules(base.replace("{body}", "y = torch.empty_like(x)\n                _k[(1,)](y)\n"
                                           "                return y"))
    assert not unused, unused
    assert "torch_compute" in _rules(base.replace("{body}", "return op(x)"))


def test_honest_files_settle_in_one_round_without_giving_up():
    """What flows through attributes, containers and parameters of the honest corpus is learnt in one
    pass (a second finds nothing new), and no name is too indirect to follow."""
    from tests.paths import HONEST

    for path in sorted((HONEST / "static").glob("*.py")):
        info = build_module(ast.parse(path.read_text()))
        resolver = Resolver(info)
        before = dict(resolver.params)
        resolver.settle()
        assert resolver.params == before and not resolver.too_deep, path.name


@pytest.mark.parametrize(("annotation", "ok"), [
    ('"torch.Tensor"', True),
    ('"list[int] | None"', True),
    ('Literal["max pool", "a-b"]', True),
    ('"__import__(\'os\').getcwd() or int"', False),
    ('list["print(1)"]', False),
    ('"(lambda: int)()"', False),
])
def test_string_annotations_may_name_types_but_not_run_code(annotation: str, ok: bool):
    src = f"from typing import Literal\nimport torch\ndef f(x: {annotation}):\n    return x\ny: {annotation} = 1\n"
    rules = _rules(src)
    assert (not rules) if ok else rules == {"eval_exec"}, rules


def test_module_names_read_from_values_that_cannot_be_followed_are_suspect():
    result = check_policy("def f(err):\n    return err.args[0].subprocess\n")
    assert [(f.rule, f.severity) for f in result.findings] == [("introspection", "suspect")]
    own = "class A:\n    def __init__(self):\n        self.os = 1\n    def f(self):\n        return self.os\n"
    assert not _rules(own)
