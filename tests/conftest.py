"""Shared test setup: markers (gpu, cute), an isolated KERNELAGENT_HOME, and no API keys."""

from __future__ import annotations

import importlib.util
import os

import pytest

_HAS_CUDA = None


def has_cuda() -> bool:
    global _HAS_CUDA
    if _HAS_CUDA is None:
        import torch
        _HAS_CUDA = bool(torch.cuda.is_available())
    return _HAS_CUDA


def has_cutlass() -> bool:
    return importlib.util.find_spec("cutlass") is not None


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (run on the H200)")
    skip_cute = pytest.mark.skip(reason="needs nvidia-cutlass-dsl (pip install -e '.[cute]')")
    for item in items:
        if "gpu" in item.keywords and not has_cuda():
            item.add_marker(skip_gpu)
        if "cute" in item.keywords and not has_cutlass():
            item.add_marker(skip_cute)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("kahome")
    monkeypatch.setenv("KERNELAGENT_HOME", str(home))
    for key in list(os.environ):
        if key.endswith("_API_KEY") and not key.startswith("KERNELAGENT_TEST"):
            monkeypatch.delenv(key, raising=False)
    yield home


def pytest_runtest_logreport(report):
    """With KA_EAGER_FAILURES=1, print each failure as it happens (GPU runs may be cut off by a timeout)."""
    if report.failed and os.environ.get("KA_EAGER_FAILURES") == "1":
        text = str(report.longrepr)
        print(f"\n--- FAILED {report.nodeid} ({report.when}, {report.duration:.1f}s)\n{text[-2500:]}\n", flush=True)
    elif report.when == "call" and os.environ.get("KA_EAGER_FAILURES") == "1":
        print(f"\n--- {report.outcome} {report.nodeid} ({report.duration:.1f}s)", flush=True)
