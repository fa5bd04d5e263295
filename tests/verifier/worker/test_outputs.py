"""Outputs are checked and flattened without running any code of the candidate's: containers or tensors
of its own types are refused before anything iterates them."""

from __future__ import annotations

import pytest
import torch

from kernelagent.verifier import tensorio
from kernelagent.verifier.worker.outputs import OutputError, check_outputs


def test_plain_structures_are_described_like_the_reference():
    x = torch.zeros(2, 3)
    for out in (x, (x,), (x, x.long()), [x, 3], {"a": x, "b": (x, None)}):
        leaves, desc = check_outputs(out)
        assert desc == tensorio.describe(out)
        assert len(leaves) == len(tensorio.flatten(out)[0])


def test_a_container_subclass_is_refused_without_being_iterated():
    ran = []

    class Sneaky(tuple):
        def __iter__(self):
            ran.append("iter")
            return super().__iter__()

        def __len__(self):
            ran.append("len")
            return 1

    with pytest.raises(OutputError, match="Sneaky"):
        check_outputs(Sneaky([torch.zeros(1)]))
    with pytest.raises(OutputError):
        check_outputs((torch.zeros(1), Sneaky([torch.zeros(1)])))
    assert ran == []


def test_tensor_subclasses_and_other_objects_are_refused():
    class Lazy(torch.Tensor):
        pass

    with pytest.raises(OutputError, match="subclass"):
        check_outputs(torch.zeros(2).as_subclass(Lazy))
    with pytest.raises(OutputError):
        check_outputs(object())


def test_a_metaclass_cannot_run_code_while_the_type_is_named():
    ran = []

    class Meta(type):
        def __getattribute__(cls, name):
            ran.append(name)
            return super().__getattribute__(name)

    class Out(metaclass=Meta):
        pass

    with pytest.raises(OutputError, match="Out"):
        check_outputs(Out())
    assert ran == []


def test_tensors_without_readable_values_are_refused():
    """A meta or sparse output cannot be saved or compared: the candidate's mismatch, not the verifier's error."""
    with pytest.raises(OutputError, match="meta"):
        check_outputs(torch.empty(3, device="meta"))
    with pytest.raises(OutputError, match="sparse"):
        check_outputs([torch.eye(3).to_sparse()])
    assert check_outputs(torch.zeros(2))[1] == "Tensor(2,):float32"
