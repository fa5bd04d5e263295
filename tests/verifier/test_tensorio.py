"""Moving tensors between the verifier's processes: large tensors travel as raw side files."""

from collections import OrderedDict

import pytest
import torch

from kernelagent.verifier import tensorio


def _roundtrip(tmp_path, payload):
    tensorio.save(tmp_path / "x.pt", payload)
    return tensorio.load(tmp_path / "x.pt")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64,
                                   torch.bool, torch.complex64, torch.uint8])
def test_large_tensors_round_trip_bit_exact_through_raw_files(tmp_path, dtype):
    big = torch.randn(1200, 1000).to(dtype) if dtype != torch.complex64 else torch.randn(300, 1000, dtype=dtype)
    got = _roundtrip(tmp_path, {"outputs": [big, 3, None, 2.5]})
    raws = list(tmp_path.glob("x.pt.*.raw"))
    assert len(raws) == 1 and raws[0].stat().st_size == big.nbytes
    out = got["outputs"]
    assert out[1:] == [3, None, 2.5]
    assert out[0].dtype == dtype and out[0].shape == big.shape
    assert torch.equal(out[0].view(torch.uint8) if dtype == torch.bool else out[0], big.view(torch.uint8)
                       if dtype == torch.bool else big)


def test_nested_structures_views_and_small_tensors(tmp_path):
    base = torch.arange(2 * 1024 * 1024, dtype=torch.float32).reshape(1024, 2048)
    payload = {"inputs": [base.t(), (base[::2], torch.ones(3))],
               "states": [OrderedDict(w=torch.full((512, 1024), 7.0), b=torch.zeros(4))],
               "grads": {"inputs": [None], "params": {"w": base.conj()}}}
    got = _roundtrip(tmp_path, payload)
    assert torch.equal(got["inputs"][0], base.t()) and got["inputs"][0].shape == (2048, 1024)
    assert isinstance(got["inputs"][1], tuple) and torch.equal(got["inputs"][1][0], base[::2])
    assert torch.equal(got["inputs"][1][1], torch.ones(3))
    assert isinstance(got["states"][0], OrderedDict) and list(got["states"][0]) == ["w", "b"]
    assert torch.equal(got["states"][0]["w"], torch.full((512, 1024), 7.0))
    assert got["grads"]["inputs"] == [None] and torch.equal(got["grads"]["params"]["w"], base)
    assert len(list(tmp_path.glob("x.pt.*.raw"))) == 4  # the three large ones and the 2 MiB state


def test_loaded_tensor_is_private_to_the_reader(tmp_path):
    big = torch.zeros(1024, 512)
    got = _roundtrip(tmp_path, {"t": big})["t"]
    got += 1  # copy-on-write: the file stays as written
    again = tensorio.load(tmp_path / "x.pt")["t"]
    assert float(again.abs().sum()) == 0.0


def test_truncated_or_padded_raw_file_is_refused(tmp_path):
    tensorio.save(tmp_path / "x.pt", {"t": torch.ones(1024, 512)})
    raw = tmp_path / "x.pt.0.raw"
    raw.write_bytes(raw.read_bytes()[:-4])
    with pytest.raises(ValueError, match="bytes, expected"):
        tensorio.load(tmp_path / "x.pt")


def test_forged_marker_is_refused(tmp_path):
    torch.save({"t": {"__ka_raw__": 0, "dtype": "object", "shape": [4]}}, tmp_path / "x.pt")
    (tmp_path / "x.pt.0.raw").write_bytes(b"\0" * 32)
    with pytest.raises(ValueError, match="malformed raw tensor marker"):
        tensorio.load(tmp_path / "x.pt")
    torch.save({"t": {"__ka_raw__": 0, "dtype": "float32", "shape": [-1, 2]}}, tmp_path / "x.pt")
    with pytest.raises(ValueError, match="malformed"):
        tensorio.load(tmp_path / "x.pt")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the H200)")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.bool, torch.complex64, torch.int64])
def test_device_tensors_cross_through_the_pinned_stage_bit_exact(tmp_path, monkeypatch, dtype):
    """From the GPU the bytes go through a reused pinned buffer, chunk by chunk: a stage smaller than the
    tensor and a size that is no multiple of it exercise every chunk boundary, a transposed view the
    contiguous copy."""
    monkeypatch.setattr(tensorio, "STAGE_BYTES", 3 * 2**20 + 5)
    monkeypatch.setattr(tensorio, "_stage", [])
    g = torch.Generator(device="cuda").manual_seed(1)
    base = torch.randn(1031, 2053, device="cuda", generator=g)
    big = (base > 0) if dtype == torch.bool else base.to(dtype)
    view = big.t()  # not contiguous
    got = _roundtrip(tmp_path, {"outputs": [big, view]})["outputs"]
    for want, have in zip([big, view], got, strict=True):
        assert have.device.type == "cpu" and have.dtype == dtype and have.shape == want.shape
        assert torch.equal(have.view(torch.uint8), want.cpu().contiguous().view(torch.uint8))
    assert tensorio._stage and tensorio._stage[0].is_pinned()
