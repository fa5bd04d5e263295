"""Turning a tensor into text on the forward path is host compute: torch's printer reads every value on the
host, with PyTorch's dispatch modes off (red team, 2026-12-03: softmax in `math` from
str(x[i, j].view(torch.int32)), accepted). Shapes, dtypes, sizes and strides are not tensors."""

from __future__ import annotations

import textwrap

import pytest

from kernelagent.verifier.policy.check import check_policy

_HEAD = "import torch\nimport torch.nn as nn\nimport operator\n\n"


def _forward(body: str, helpers: str = "") -> str:
    lines = textwrap.dedent(body).strip().splitlines()
    return (_HEAD + textwrap.dedent(helpers) + "\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
            + "".join(f"        {line}\n" for line in lines) + "        return torch.empty_like(x)\n")


def _text_findings(source: str) -> list[str]:
    return [f.message for f in check_policy(source, "k.py").findings if f.rule == "torch_compute"]


@pytest.mark.parametrize("body", [
    "s = str(x)",
    "s = repr(x[0])",
    "s = ascii(x)",
    "s = format(x, '.3f')",
    "s = format(x[0, 0])",
    "print(x)",
    "print('row', x[0], sep=',')",
    "s = f'{x}'",
    "s = f'{x[1]:.8f}'",
    "s = f'{x.view(torch.int32)!r}'",
    "s = '%s' % x",
    "s = '%s %s' % (x, x)",
    "s = '%(a)s' % {'a': x}",
    "fmt = '%' + 's'\ns = fmt % x",
    "s = '{}'.format(x)",
    "s = '{a}'.format_map({'a': x})",
    "s = str.format('{}', x)",
    "s = '%s'.__mod__(x)",
    "s = x.__str__()",
    "s = x.__repr__()",
    "s = x.__format__('')",
    "s = torch.Tensor.__repr__(x)",
    "s = object.__str__(x)",
    "s = object.__format__(x, '')",
    "f = x.__repr__",
    "s = list(map(str, x))",
    "s = sorted(x, key=repr)",
    "s = ''.join(map('{}'.format, x))",
    "s = operator.methodcaller('__str__')(x)",
    "to_text = str\ns = to_text(x)",
    "rows = [x[0], x[1]]\ns = str(rows)",
])
def test_a_tensor_turned_into_text_is_refused(body):
    assert _text_findings(_forward(body)), body


def test_text_through_a_helper_is_refused_where_it_happens():
    helpers = '''
    def read_value(t):
        return int(str(t.view(torch.int32)).split("(")[1].split(")")[0])
    '''
    found = check_policy(_forward("v = [read_value(x[0, j]) for j in range(4)]", helpers), "k.py").findings
    assert any(f.rule == "torch_compute" and "str(...)" in f.snippet + f.message for f in found), found


@pytest.mark.parametrize("body", [
    "s = str(tuple(x.shape))",
    "s = f'{x.dtype} {x.shape} {x.dim()} {x.numel():,} {x.stride()} {x.device}'",
    "s = '%d rows of %s' % (x.shape[0], x.dtype)",
    "s = '{}x{}'.format(*x.shape)",
    "print('shape', tuple(x.shape), x.dtype)",
    "s = repr(x.device)",
    "s = 'x'.join(map(str, x.shape))",
    "ok = isinstance(x, str)",
    "for name, t in (('x', x), ('again', x)):\n    s = f'{name}: {tuple(t.shape)}'",
])
def test_shapes_dtypes_and_sizes_as_text_are_allowed(body):
    assert not _text_findings(_forward(body)), body
