"""A library kernel with a match's options bound (tools.library.bound_kernel): the defaults of its ModelNew.forward
replaced by the values, nothing else changed, and only option sets the entry declares."""

from __future__ import annotations

import ast

import pytest

from kernelagent.kernels import LibraryError, get_entry
from kernelagent.tools.library import bound_kernel, declared_presets


def _forward_defaults(source: str) -> dict[str, object]:
    cls = [n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"][-1]
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
    pos = fn.args.args[len(fn.args.args) - len(fn.args.defaults):]
    return {a.arg: ast.literal_eval(d) for a, d in zip(pos, fn.args.defaults, strict=True)}


@pytest.mark.parametrize("backend", ["triton", "cute"])
def test_causal_bound_as_the_default(backend):
    entry = get_entry("attention")
    assert {"causal": True} in declared_presets(entry)
    plain = entry.backends[backend].read_text()
    bound = bound_kernel(entry, backend, {"causal": True})
    assert _forward_defaults(plain)["causal"] is False and _forward_defaults(bound)["causal"] is True
    others = {k: v for k, v in _forward_defaults(plain).items() if k != "causal"}
    assert others and {k: _forward_defaults(bound)[k] for k in others} == others
    note, body = bound.splitlines()[:2], bound.splitlines()[2:]  # two comment lines first, then the file
    assert all(ln.startswith("# ") for ln in note) and "causal=True" in note[0]
    changed = [(a, b) for a, b in zip(plain.splitlines(), body, strict=True) if a != b]
    assert len(changed) == 1 and "causal: bool = True" in changed[0][1], changed
    compile(bound, "bound.py", "exec")


def test_two_options_bound_at_once():
    entry = get_entry("attention")
    bound = bound_kernel(entry, "cute", {"layout": "bhsd", "causal": True})
    defaults = _forward_defaults(bound)
    assert defaults["layout"] == "bhsd" and defaults["causal"] is True and defaults["window"] is None
    compile(bound, "bound.py", "exec")


def test_no_options_is_the_file_and_undeclared_ones_are_refused():
    entry = get_entry("attention")
    assert bound_kernel(entry, "triton", {}) == entry.backends["triton"].read_text()
    for options in ({"causal": False}, {"scale": 2.0}, {"causal": True, "softcap": 5.0}):
        with pytest.raises(LibraryError):
            bound_kernel(entry, "triton", options)
    assert declared_presets(get_entry("softmax")) == []
