"""What the harness does to the candidate's model outside forward (copy the reference's weights in, list its
parameters) calls no method the candidate could override, and an exception the candidate's code raises on
the way is the candidate's failure, never the verifier's (red team, 2026-12-03: ModelNew.state_dict raised
"kernelagent internal: ..." and the report said internal_error, blame verifier)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.sandbox.pool import WorkerPool
from kernelagent.verifier.worker.errors import passes_through
from kernelagent.verifier.worker.model_state import ModelStateError, named_parameters, state_tensors
from tests.paths import PROBLEMS, WRONG


class _Plain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 4)
        self.norm = nn.Sequential(nn.BatchNorm1d(4), nn.LayerNorm(4))
        self.again = self.lin  # shared: state_dict names it twice, named_parameters once
        self.scale = nn.Parameter(torch.ones(1))
        self.register_buffer("kept", torch.zeros(2))
        self.register_buffer("scratch", torch.zeros(2), persistent=False)
        self.register_parameter("absent", None)


def _raise(*args, **kwargs):
    raise RuntimeError("kernelagent internal: not the candidate")


class _Child(nn.Linear):
    state_dict = _raise
    _save_to_state_dict = _raise
    named_parameters = _raise
    named_modules = _raise


class _Overrides(_Plain):
    """Every method a harness could have called raises; so does any attribute lookup that misses."""

    state_dict = _raise
    named_parameters = _raise
    parameters = _raise
    named_modules = _raise
    _save_to_state_dict = _raise

    def __init__(self) -> None:
        super().__init__()
        self.child = _Child(2, 2)
        self._register_state_dict_hook(_raise)
        self.__dict__["_armed"] = True

    def __getattr__(self, name):
        if vars(self).get("_armed"):
            raise RuntimeError("kernelagent internal: not the candidate")
        return super().__getattr__(name)


def test_the_walk_finds_what_torch_finds_on_a_plain_model():
    model = _Plain()
    expected = model.state_dict(keep_vars=True)
    found = state_tensors(model)
    assert list(found) == list(expected) and all(found[k] is expected[k] for k in expected)
    assert [(n, id(p)) for n, p in named_parameters(model)] == [(n, id(p)) for n, p in model.named_parameters()]


def test_the_walk_calls_no_override_of_the_model_or_its_children():
    model = _Overrides()
    found = state_tensors(model)
    assert "lin.weight" in found and "again.weight" in found and "child.weight" in found
    assert "scratch" not in found and "absent" not in found
    names = [n for n, _ in named_parameters(model)]
    assert "again.weight" not in names and names.count("lin.weight") == 1 and "child.bias" in names


def test_storage_that_is_not_nn_modules_own_is_refused_as_the_models():
    model = _Plain()
    model.__dict__["_parameters"] = [("weight", torch.ones(1))]
    with pytest.raises(ModelStateError, match="_parameters"):
        state_tensors(model)
    looped = _Plain()
    looped.norm.add_module("back", looped)  # a module inside itself: entered once per path
    assert "norm.0.weight" in state_tensors(looped)


def test_an_exception_is_the_candidates_when_its_file_was_running():
    namespace: dict = {}
    exec(compile("def boom():\n    raise KeyError('x')\n", "/tmp/candidate_abc.py", "exec"), namespace)  # noqa: S102

    class Sly(Exception):
        @property
        def __traceback__(self):  # the attribute lies: the descriptor of BaseException does not
            return None

    try:
        try:
            namespace["boom"]()
        except KeyError as inner:
            raise Sly("verifier bug?") from inner
    except Sly as e:
        assert passes_through(e, "/tmp/candidate_abc.py")
        assert not passes_through(e, "/tmp/other.py") and not passes_through(e, "")


def test_an_exception_in_the_weight_copy_is_the_candidates_failure():
    """End to end: the corpus file whose Parameter subclass raises in copy_ (and whose state_dict raises)."""
    options = VerifyOptions(device="cpu", timeout=60, seeds=2, static_policy=False)
    with Verifier(options, pool=WorkerPool(size=1)) as verifier:
        report = verifier.verify(PROBLEMS / "corpus" / "scale.py", WRONG / "dynamic" / "blame_weight_copy.py")
    assert report.category == "runtime_error" and report.blame == "candidate", (report.category, report.message)
    assert "copying the reference's weights" in report.message and "kernelagent internal" in report.message
