"""The policy's string folding is exact or silent: whatever it folds an expression to is what Python computes,
else None. A fold that differs lets a file show the policy one name and run another (red team, 2026-12-05:
str() of bytes, f-string conversions and a file's own `str` each turned torch.softmax into an allowed name), and
a fold that raises or grows without bound took the verifier down or held it for minutes."""

from __future__ import annotations

import ast
import random
import warnings

import pytest

from kernelagent.problem import ProblemError, inspect_candidate, static_signature_mismatch
from kernelagent.verifier.policy import check as check_module
from kernelagent.verifier.policy.check import check_policy
from kernelagent.verifier.policy.fold import _apply_str_method
from kernelagent.verifier.policy.names import Resolver
from kernelagent.verifier.policy.scopes import build_module


def _fold_source(source: str, name: str = "x"):
    """What the policy folds the last binding of `name` in `source` to."""
    tree = ast.parse(source)
    resolver = Resolver(build_module(tree))
    node = [n for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == name][-1].value
    return resolver.fold(node, resolver.info.scope)


_PIECES = ["soft", "max", "{}", "{", "}", "b'", "'", "_C", "x", "{0}", "{:3}", "", "ab", "\\\\", "%s"]


def _atom(rng: random.Random, depth: int, lines: list[str]) -> str:
    """A random string expression; f-strings take their field from a name bound on a line of its own (Python
    3.11 f-strings cannot nest the quotes the other pieces use)."""
    kind = rng.randrange(9 if depth < 3 else 3)
    piece = repr(rng.choice(_PIECES))
    if kind == 0:
        return piece
    if kind == 1:
        return "b" + piece
    if kind == 2:
        return f"chr({rng.choice([65, 97, 123, 125, 39])})"
    inner = _atom(rng, depth + 1, lines)
    if kind == 3:
        return f"str({inner})"
    if kind == 4:
        lines.append(f"v{len(lines)} = {inner}")
        conv = rng.choice(["", "!r", "!s", "!a", ":>4", ":.2"])
        return f"f'{{v{len(lines) - 1}{conv}}}-'"
    if kind == 5:
        return f"({inner} + {_atom(rng, depth + 1, lines)})"
    if kind == 6:
        return f"({inner} * {rng.randrange(3)})"
    if kind == 7:
        return f"({inner})[{rng.choice(['1:', '::-1', '0', ':2'])}]"
    method = rng.choice(["upper()", "strip(\"'\")", "removeprefix(\"b'\")", "removesuffix(\"'\")",
                         "replace(\"'\", \"\")", "format(\"A\", \"B\")", "decode()", "encode()",
                         "join([\"p\", \"q\"])", "title()"])
    return f"({inner}).{method}"


def test_random_string_expressions_fold_to_what_python_computes_or_to_nothing():
    rng = random.Random(20261205)
    folded = 0
    for _ in range(600):
        lines: list[str] = []
        expr = _atom(rng, 0, lines)
        source = "\n".join([*lines, f"x = {expr}"]) + "\n"
        namespace: dict = {"__builtins__": {"str": str, "chr": chr}}
        try:
            with warnings.catch_warnings():  # "(...)[0]" of an int product: a SyntaxWarning, then a TypeError
                warnings.simplefilter("ignore", SyntaxWarning)
                exec(source, namespace)  # noqa: S102 - constants only
            value = namespace["x"]
        except Exception:  # noqa: BLE001 - Python raises: the fold must not claim a value
            value = None
        got = _fold_source(source)
        if got is not None:
            folded += 1
            assert got == value and isinstance(value, str), (source, got, value)
    assert folded >= 150, folded  # the fold still reads most plain string expressions


@pytest.mark.parametrize("body", [
    "def str(v):\n    return 'softmax'\nx = str('empty_like')\n",
    "def chr(c):\n    return 's'\nx = chr(101)\n",
    "def reversed(t):\n    return 'xamtfos'\nx = ''.join(reversed('abc'))\n",
    "def map(f, xs):\n    return ['s']\nx = ''.join(map(chr, [101]))\n",
    "x = ''.join(map(chr, [101, 1114112]))\n",  # chr raises on the second code
])
def test_the_files_own_builtins_and_raising_calls_do_not_fold(body):
    assert _fold_source(body) is None


def test_format_folds_bare_fields_only_and_no_call_grows_without_bound():
    assert _apply_str_method("{}_{}", "format", ["soft", "max"]) == "soft_max"
    for template in ("{:{}}", "{0}", "{a}", "{!r}", "{{}}", "{:>9}", "}{"):
        assert _apply_str_method(template, "format", ["a", "9"]) is None, template
    assert _apply_str_method("abc", "replace", ["", "x"]) is None
    assert _apply_str_method("a" * 900, "replace", ["a", "bb"]) is None  # 1800 characters: past any name
    assert _apply_str_method("ab", "replace", ["b", "c"]) == "ac"
    assert _apply_str_method("abc", "encode", []) is None and _apply_str_method("a", "zfill", ["x"]) is None
    assert _fold_source("x = '-'.join(" + repr(["y"] * 5000) + ")\n") is None


def test_a_policy_that_fails_on_a_file_rejects_it(monkeypatch):
    def broken(self):
        raise AttributeError("'str' object has no attribute 'decode'")

    monkeypatch.setattr(check_module.ModuleChecker, "run", broken)
    result = check_policy("import torch\nx = 1\n", "k.py")
    assert not result.ok and [f.rule for f in result.violations] == ["syntax"]
    assert "AttributeError" in result.violations[0].message


def test_sources_nested_past_the_parser_are_the_files_fault(tmp_path):
    deep = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x, k=" + \
        "+".join(["1"] * 3000) + "):\n        return x\n"
    path = tmp_path / "deep.py"
    path.write_text(deep)
    with pytest.raises(ProblemError, match="nested too deeply"):
        inspect_candidate(path)
    medium = deep.replace("+".join(["1"] * 3000), "+".join(["1"] * 400))  # parses, but ast.unparse recurses
    problem = "import torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n"
    assert static_signature_mismatch(problem, medium) is None
