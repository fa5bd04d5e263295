"""A library kernel with a match's options bound (tools.presets): only a preset the entry's reference declares, type
for type; its values written as the defaults of the kernel's ModelNew.forward, nothing else changed."""

from __future__ import annotations

import ast

import pytest

from kernelagent.kernels import LibraryEntry, LibraryError, get_entry
from kernelagent.tools.presets import bound_kernel, declared, declared_presets


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
    for options in ({"causal": False}, {"scale": 2.0}, {"causal": True, "softcap": 5.0}, {"causal": 1},
                    ["causal"], "causal=True"):
        with pytest.raises(LibraryError):
            bound_kernel(entry, "triton", options)
    assert declared_presets(get_entry("softmax")) == []


def _entry(tmp_path, presets_src: str, forward_line: str, extra: str = "") -> LibraryEntry:
    ref = tmp_path / "reference.py"
    ref.write_text(f"import torch\n{presets_src}\n")
    kernel = tmp_path / "triton.py"
    kernel.write_text(f"# a form feed in a comment: \f end\n{extra}class ModelNew:\n    {forward_line}\n"
                      "        return x\n")
    return LibraryEntry(name="toy", family="toy", path=tmp_path, reference_path=ref, backends={"triton": kernel})


def test_declared_literal_written_as_declared_on_the_parsers_lines(tmp_path):
    """A tuple preset comes back from a match as a list and is written as the tuple; a form feed (a line break to
    str.splitlines, not to Python) moves no edit; the last assignment of MATCH_PRESETS counts, annotated too."""
    entry = _entry(tmp_path, 'MATCH_PRESETS = [{"w": (1, 2)}]\nMATCH_PRESETS: list = [{}, {"w": (3, 0), "a": True}]',
                   "def forward(self, x, w=None, a=False):  # é")
    assert declared_presets(entry) == [{}, {"w": (3, 0), "a": True}]
    assert declared(entry, {"a": True, "w": [3, 0]}) == {"w": (3, 0), "a": True}
    bound = bound_kernel(entry, "triton", {"a": True, "w": [3, 0]})
    assert "def forward(self, x, w=(3, 0), a=True):  # é" in bound
    assert _forward_defaults(bound) == {"w": (3, 0), "a": True}
    with pytest.raises(LibraryError):
        bound_kernel(entry, "triton", {"w": [1, 2]})  # the first assignment, which Python replaces


def test_a_default_the_forward_lacks_is_refused(tmp_path):
    entry = _entry(tmp_path, 'MATCH_PRESETS = [{}, {"b": 1}]', "def forward(self, x, a=False):")
    with pytest.raises(LibraryError, match="no default"):
        bound_kernel(entry, "triton", {"b": 1})
