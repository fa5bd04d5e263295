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
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_buffer_protocol_names_are_refused(name):
    result = check_policy(HEAD + CASES[name], "k.py")
    assert any(f.rule == "torch_compute" for f in result.findings), (name, result.findings)


def test_an_ordinary_class_passes_that_rule():
    result = check_policy(HEAD + "class R:\n    shape = (2, 3)\n", "k.py")
    assert not any(f.rule == "torch_compute" for f in result.findings), result.findings
