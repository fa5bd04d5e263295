"""The estimator: sizes read from a problem's source, peak-memory estimates, refusals that name the size,
the estimate and what is free, and the CPU-time refusal; plus the verifier's up-front refusal."""

from __future__ import annotations

import textwrap

import pytest

from kernelagent.problem import inspect_problem
from kernelagent.verifier import estimate as E
from kernelagent.verifier.estimate import Bytes, Machine, Sizes, static_sizes
from kernelagent.verifier.options import VerifyOptions
from tests.paths import EXAMPLES

KB_STYLE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x, t):
        return x

batch_size = 128
input_shape = (4096,)
D, H, W = 4, 8, 16
n = batch_size * 2

def get_inputs():
    a = torch.rand(batch_size, *input_shape)
    b = torch.randint(0, 10, (n,))
    c = torch.randn(D, H, W, dtype=torch.float16).cuda()
    d = torch.randn(batch_size, 64).half()
    return [a, b, c, d]
'''


def test_static_sizes_follow_the_kernelbench_pattern():
    s = static_sizes(KB_STYLE)
    assert s is not None and s.source == "static"
    a, b, c, d = 128 * 4096, 256, 4 * 8 * 16, 128 * 64
    assert s.elements == a + b + c + d
    assert s.inputs.native == a * 4 + b * 8 + c * 2 + d * 2
    assert s.inputs.f64 == a * 8 + b * 8 + c * 8 + d * 8  # integers are not upcast


@pytest.mark.parametrize("body", [
    "return [torch.tensor([1.0, 2.0])]",                    # values, not a shape
    "xs = []\n    for _ in range(3):\n        xs.append(torch.randn(4))\n    return xs",  # a loop
    "return [make_input()]",                                # an unknown call
    "return [torch.randn(unknown_size)]",                   # an unknown name
])
def test_static_sizes_gives_up_on_what_it_cannot_follow(body):
    src = f"import torch\n\ndef get_inputs():\n    {body}\n"
    assert static_sizes(src) is None


def test_static_sizes_without_get_inputs_or_unparsable():
    assert static_sizes("x = 1\n") is None
    assert static_sizes("def get_inputs(:\n") is None


def _sizes(inputs: int, outputs: int | None = None, params: int = 0) -> Sizes:
    o = inputs if outputs is None else outputs
    return Sizes(inputs=Bytes(inputs, 2 * inputs), params=Bytes(params, 2 * params), outputs=Bytes(o, 2 * o),
                 forward=Bytes(o, 2 * o), elements=inputs // 4)


def test_estimates_grow_with_the_problem_and_float64_costs_more():
    small, big = _sizes(1 << 20), _sizes(1 << 30)
    assert E.audit_peak(big, "cpu", True).host > E.audit_peak(small, "cpu", True).host
    assert E.audit_peak(big, "cpu", True).host > E.audit_peak(big, "cpu", False).host
    gpu = E.audit_peak(big, "cuda", False)
    assert gpu.device > big.inputs.native * 2 and gpu.host == E.HOST_BASE_CUDA
    three, six = E.verifier_peak(big, 3, "cpu"), E.verifier_peak(big, 6, "cpu")
    assert six.host > three.host  # the pack holds every trial
    assert three.parts["reference pack"] == 3 * (big.inputs.native + big.outputs.native + big.outputs.f64)


def test_a_refusal_names_the_size_the_estimate_and_what_is_free():
    machine = Machine(host_available=8 * E.GB, host_total=16 * E.GB)
    sizes = _sizes(6 * E.GB)
    est = E.audit_peak(sizes, "cpu", True)
    msg = E.memory_refusal(est, machine, "auditing this problem", sizes)
    assert msg is not None
    assert "inputs 6.0 GB" in msg and E.fmt_bytes(est.host) in msg and "8.0 GB free" in msg
    assert E.memory_refusal(E.audit_peak(_sizes(1 << 20), "cpu", True), machine, "x") is None
    gpu = Machine(host_available=64 * E.GB, host_total=64 * E.GB, device_total=8 * E.GB, device_free=8 * E.GB)
    assert "GPU memory" in E.memory_refusal(E.audit_peak(sizes, "cuda", True), gpu, "x")


def test_cpu_time_refusal_for_a_large_main_set():
    """Issue 22: a correct kernel on 10000x10000 ran into the 300 s limit on CPU and was blamed."""
    msg = E.time_refusal(10000 * 10000, 3, 300.0, 1 << 20)
    assert msg is not None and "300 s limit" in msg and "100,000,000 elements" in msg
    assert E.time_refusal(1 << 20, 3, 300.0, 1 << 20) is None


def _problem(tmp_path, n: int, test_inputs: bool = False):
    extra = "\n\ndef get_test_inputs():\n    return [[torch.randn(4, 8)]]\n" if test_inputs else ""
    src = textwrap.dedent(f'''
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, x):
                return torch.softmax(x, dim=-1)

        def get_inputs():
            return [torch.randn({n}, {n})]
        ''') + extra
    path = tmp_path / "op.py"
    path.write_text(src)
    return inspect_problem(path)


def test_the_verifier_refuses_a_20000_square_problem_up_front(tmp_path, monkeypatch):
    """Issue 22: 20000x20000 fp32 grew a reference worker to ~11 GB before the OOM killer; now the estimate
    says no before any worker starts (CPU: the time; a GPU machine of this size: the memory)."""
    spec = _problem(tmp_path, 20000)
    cpu = E.refuse_verify(spec, VerifyOptions(device="cpu"), "cpu")
    assert cpu and "400,000,000 elements" in cpu
    monkeypatch.setattr(E, "read_machine", lambda device="cpu", **kw: Machine(32 * E.GB, 32 * E.GB))
    gpu = E.refuse_verify(spec, VerifyOptions(device="cuda"), "cuda")
    assert gpu and "host memory" in gpu and "32.0 GB free" in gpu


def test_problems_the_machine_can_take_are_let_through(tmp_path):
    assert E.refuse_verify(_problem(tmp_path, 64), VerifyOptions(device="cpu"), "cpu") is None
    # a large main set with small test sets: the CPU path checks the test sets
    assert E.refuse_verify(_problem(tmp_path, 20000, test_inputs=True), VerifyOptions(device="cpu"), "cpu") is None
    assert E.refuse_verify(inspect_problem(EXAMPLES / "softmax" / "op.py"), VerifyOptions(device="cpu"), "cpu") is None


def test_verify_reports_the_refusal_as_the_problems_fault(tmp_path):
    from kernelagent.verifier.api import verify
    from tests.paths import softmax_case

    report = verify(_problem(tmp_path, 20000).path, softmax_case("good"), VerifyOptions(device="cpu"))
    assert report.category == "load_error" and report.blame == "problem"
    assert "elements" in report.message and report.stages[0].status == "failed"


def test_machine_readings():
    m = E.read_machine("cpu")
    assert 0 < m.host_available <= m.host_total
    info = E._meminfo("MemTotal:       16384 kB\nMemAvailable:    8192 kB\nHugePages_Total:       0\n")
    assert info == {"MemTotal": 16 * E.MB, "MemAvailable": 8 * E.MB, "HugePages_Total": 0}
    count = E.oom_kill_count()
    assert count is None or count >= 0
