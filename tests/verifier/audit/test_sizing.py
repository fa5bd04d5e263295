"""Sizing on the meta device: exact bytes of inputs, parameters and outputs, the most one forward holds at
once, and the fallbacks when a problem cannot run on meta."""

from __future__ import annotations

import textwrap

import torch

from kernelagent.problem import load_problem
from kernelagent.verifier.audit.sizing import LivePeak, size_problem


def _write(tmp_path, source: str):
    path = tmp_path / "op.py"
    path.write_text(textwrap.dedent(source))
    return load_problem(path)


LINEAR = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.lin = nn.Linear(n_in, n_out)

    def forward(self, x):
        h = torch.relu(self.lin(x))        # (B, n_out)
        big = h.unsqueeze(-1).expand(-1, -1, 8).contiguous()   # (B, n_out, 8): a large intermediate
        return big.sum(-1)

def get_inputs():
    return [torch.randn(32, 64)]

def get_init_inputs():
    return [64, 128]

def get_test_inputs():
    return [[torch.randn(2, 64)]]
'''


def test_linear_problem_is_sized_exactly_on_meta(tmp_path):
    sizes, sets = size_problem(_write(tmp_path, LINEAR))
    assert sizes.source == "meta" and len(sets) == 2
    assert sizes.inputs.native == 32 * 64 * 4 and sizes.inputs.f64 == 32 * 64 * 8
    assert sizes.params.native == (64 * 128 + 128) * 4
    assert sizes.outputs.native == 32 * 128 * 4
    assert sizes.elements == 32 * 64
    # the forward holds the (B, n_out, 8) intermediate and more at its peak
    assert sizes.forward.native >= 32 * 128 * 8 * 4 + 32 * 128 * 4
    assert sizes.forward.f64 == 2 * sizes.forward.native


def test_live_peak_counts_what_is_alive_not_what_was_made():
    x = torch.empty(1000, device="meta")
    with torch.no_grad(), LivePeak([x]) as mode:
        for _ in range(10):
            y = x * 2          # 4000 bytes, freed when y is rebound
            del y
        z = x + 1
    assert mode.peak[0] == 4000 and mode.now[0] == 4000
    del z
    assert mode.now[0] == 0


def test_a_problem_that_reads_values_is_sized_on_the_cpu(tmp_path):
    source = LINEAR.replace("return [torch.randn(32, 64)]", "n = int(torch.tensor(32).item())\n    "
                            "return [torch.randn(n, 64)]")
    sizes, _ = size_problem(_write(tmp_path, source))
    assert sizes.source == "cpu" and sizes.inputs.native == 32 * 64 * 4


def test_a_forward_meta_cannot_run_gives_a_rough_size(tmp_path):
    source = LINEAR.replace("return big.sum(-1)", "return big.sum(-1) * float(x.abs().max())")
    sizes, _ = size_problem(_write(tmp_path, source))
    assert sizes.source == "rough" and sizes.outputs.native == sizes.inputs.native
    assert sizes.params.native == (64 * 128 + 128) * 4


def test_sizing_runs_no_real_allocation_for_a_large_problem(tmp_path):
    """A 64 GB input is sized without allocating it."""
    sizes, _ = size_problem(_write(tmp_path, LINEAR.replace("torch.randn(32, 64)", "torch.randn(1 << 28, 64)")))
    assert sizes.inputs.native == (1 << 28) * 64 * 4 and sizes.source == "meta"
