"""Objects of the candidate's own must not offer memory through NumPy's or DLPack's buffer protocols: with
a tensor's data_ptr() in `__array_interface__`, np.asarray is a view of the tensor (red team, 2026-12-03).
Refused wherever the name appears."""

from __future__ import annotations

import pytest

from kernelagent.verifier.policy.check import check_policy

HEAD = "import numpy as np\nimport torch\n"
CASES = {
    "assigned": "class R:\n    def __init__(self, a):\n        self.__array_interface__ = {'data': (a, False)}\n",
    "class_attr": "class R:\n    __array_interface__ = {}\n",
    "method": "class R:\n    def __array__(self):\n        return None\n",
    "setattr": "class R:\n    pass\nr = R()\nsetattr(r, '__array_interface__', {})\n",
    "type_dict": "R = type('R', (), {'__cuda_array_interface__': {}})\n",
    "dlpack": "class R:\n    def __dlpack__(self, stream=None):\n        return None\n",
    # built from pieces (the review of the fix): folded like any attribute name
    "setattr_concat": "class R:\n    pass\nr = R()\nsetattr(r, '__array_' + 'interface__', {})\n",
    "dict_update_concat": ("class R:\n    def __init__(self):\n"
                           "        self.__dict__.update({'__array_' + 'interface__': {}})\n"),
    "format": "k = '__array_{}__'.format('interface')\n",
    "chr_join": "k = ''.join(map(chr, [95, 95, 97, 114, 114, 97, 121, 95, 95]))\n",
}
# attributes set through an object's own namespace dict with keys the checks cannot read
NAMESPACE_WRITES = {
    "update_from_call": ("def f(d):\n    return d\nclass R:\n    def __init__(self, d):\n"
                         "        self.__dict__.update(f(d))\n"),
    "subscript_key": "class R:\n    def __init__(self, k):\n        self.__dict__[k] = 1\n",
    "setdefault_key": "class R:\n    def __init__(self, k):\n        self.__dict__.setdefault(k, 1)\n",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_buffer_protocol_names_are_refused(name):
    result = check_policy(HEAD + CASES[name], "k.py")
    assert any(f.rule == "torch_compute" for f in result.findings), (name, result.findings)


def test_an_ordinary_class_passes_that_rule():
    result = check_policy(HEAD + "class R:\n    shape = (2, 3)\n", "k.py")
    assert not any(f.rule == "torch_compute" for f in result.findings), result.findings


@pytest.mark.parametrize("name", sorted(NAMESPACE_WRITES))
def test_namespace_writes_with_unknown_keys_are_refused(name):
    result = check_policy(HEAD + NAMESPACE_WRITES[name], "k.py")
    assert any(f.rule == "dynamic_attr" for f in result.findings), (name, result.findings)


def test_namespace_reads_and_literal_writes_pass():
    source = HEAD + ("class R:\n    def __init__(self):\n        self.__dict__.update({'a': 1})\n"
                     "        d = self.__dict__\n")
    assert not check_policy(source, "k.py").findings
