"""Batch tools: which files are problems and which are their candidates, how shards are planned, and the
same batch on a local Ray instance (results written into the same database by the driver)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from kernelagent.kernels import LIBRARY_ROOT
from kernelagent.memory import batches as B
from kernelagent.memory import open_store
from kernelagent.tools.batch import BatchError, BatchOptions, BatchRunner, discover, is_problem, shard_plan
from tests.paths import EXAMPLES, HONEST, PROBLEMS

KB_PROBLEM = PROBLEMS / "corpus" / "relu.py"


def test_examples_and_the_library_follow_the_folder_convention():
    found = {(p.path.parent.name, p.path.name): sorted(c.name for c in p.candidates)
             for p in discover([EXAMPLES, LIBRARY_ROOT])}
    assert found[("softmax", "op.py")] == ["kernel.py", "kernel_cute.py"]
    shelf = sorted(f.name for f in (LIBRARY_ROOT / "softmax").glob("*.py") if f.stem in ("triton", "cute"))
    assert "triton.py" in shelf and found[("softmax", "reference.py")] == shelf
    assert ("kernels", "__init__.py") not in found
    names = {p.name for p in discover([EXAMPLES])}
    assert {"softmax", "rms_norm", "cross_entropy"} <= names


def test_a_kernelbench_level_folder_is_read_as_it_is(tmp_path):
    level = tmp_path / "level1"
    level.mkdir()
    for name in ("1_Square_matmul_.py", "19_ReLU.py"):
        shutil.copy(KB_PROBLEM, level / name)
    shutil.copy(HONEST / "dynamic" / "relu_view.py", level / "19_ReLU_kernel.py")
    shutil.copy(HONEST / "dynamic" / "relu_view.py", level / "19_ReLU_triton_v2.py")
    (level / "helpers.py").write_text("def f():\n    return 1\n")
    (level / "broken.py").write_text("def (:\n")
    (level / "__init__.py").write_text("")
    found = {p.path.name: [c.name for c in p.candidates] for p in discover([level])}
    assert found == {"19_ReLU.py": ["19_ReLU_kernel.py", "19_ReLU_triton_v2.py"], "1_Square_matmul_.py": []}
    assert is_problem(level / "19_ReLU.py") and not is_problem(level / "19_ReLU_kernel.py")
    assert [p.path.name for p in discover([level / "19_ReLU.py", level])].count("19_ReLU.py") == 1


def test_inputs_that_are_not_problems_are_refused(tmp_path):
    (tmp_path / "k.py").write_text("class ModelNew:\n    pass\n")
    with pytest.raises(BatchError, match="not a problem file"):
        discover([tmp_path / "k.py"])
    with pytest.raises(BatchError, match="does not exist"):
        discover([tmp_path / "missing"])
    with open_store(tmp_path / "home") as store, pytest.raises(BatchError, match="no problem files"):
        BatchRunner(store, [], BatchOptions())


def test_shards_on_a_machine_without_gpus():
    assert shard_plan(BatchOptions(device="cpu", jobs=3)) == [("cpu0", "", "cpu"), ("cpu1", "", "cpu"),
                                                              ("cpu2", "", "cpu")]
    assert shard_plan(BatchOptions(device="cpu")) == [("cpu0", "", "cpu")]


def test_gpu_shards_are_pinned_one_per_gpu(monkeypatch):
    import kernelagent.tools.batch.shards as shards

    monkeypatch.setattr(shards, "_visible_ids", lambda: ["4", "5", "6"])
    assert shard_plan(BatchOptions(gpus=[0, 2])) == [("gpu0", "4", "cuda"), ("gpu2", "6", "cuda")]
    assert [s[1] for s in shard_plan(BatchOptions())] == ["4", "5", "6"]
    with pytest.raises(BatchError, match="0..2"):
        shard_plan(BatchOptions(gpus=[3]))
    with pytest.raises(BatchError):
        shard_plan(BatchOptions(gpus=[1, 1]))
    monkeypatch.setattr(shards, "_visible_ids", lambda: [])
    with pytest.raises(BatchError, match="no CUDA GPU"):
        shard_plan(BatchOptions(gpus=[0]))


needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs Ray (pip install -e '.[ray]')")


@needs_ray
def test_batch_on_a_local_ray_instance(tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    shutil.copy(PROBLEMS / "corpus" / "scale.py", folder / "scale.py")
    shutil.copy(HONEST / "dynamic" / "scale_weight.py", folder / "scale_kernel.py")
    events = []
    with open_store(tmp_path / "home") as store:
        opts = BatchOptions(device="cpu", seeds=1, ray="local", jobs=1)
        summary = BatchRunner(store, discover([folder]), opts, progress=events.append).run()
        assert (summary["evaluated"], summary["correct"]) == (1, 1)
        [item] = B.items(store, summary["batch_id"])
        assert item["worker"].startswith("ray:") and item["verdict"] == "accepted"
        attempt = store.attempt(item["attempt_id"])
        assert attempt["source"] == (folder / "scale_kernel.py").read_text()
        assert store.run(attempt["run_id"])["batch_id"] == summary["batch_id"]
        again = BatchRunner(store, discover([folder]), opts).run()  # finished: Ray is not even started
        assert again == summary and store.db.table("attempts").count == 1
    assert [e["event"] for e in events if e["event"] in ("plan", "shards", "done")] == ["plan", "shards", "done"]


@needs_ray
def test_ray_refuses_optimize_mode(tmp_path):
    with open_store(tmp_path / "home") as store:
        runner = BatchRunner(store, discover([KB_PROBLEM]), BatchOptions(mode="optimize", ray="local"),
                             provider=object())
        with pytest.raises(BatchError, match="--mode verify"):
            runner.run()


def test_ray_missing_is_a_clear_error(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray":
            raise ImportError("no ray here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with open_store(tmp_path / "home") as store:
        runner = BatchRunner(store, discover([KB_PROBLEM]), BatchOptions(ray="local", device="cpu"))
        runner.problems = [type(runner.problems[0])(Path(KB_PROBLEM), (HONEST / "dynamic" / "relu_view.py",))]
        with pytest.raises(BatchError, match=r"kernelagent\[ray\]"):
            runner.run()


class FakeShard:
    """A shard that runs the fake verifier in this process (the driver's logic under test, not the verifier)."""

    def __init__(self, label, visible, options):
        self.label, self.visible, self.options, self.active = label, visible, options, 0
        self.calls = []

    def call(self, fn, *args):
        from kernelagent.tools.batch import shard_verify
        from tests.fakes.verify import fake_verify

        self.calls.append(fn.__name__)
        return fake_verify(*args, None).to_dict() if fn is shard_verify else {}

    def close(self, wait=True):
        pass


def test_optimize_mode_runs_the_agent_per_problem_and_buys_nothing_twice(tmp_path, monkeypatch):
    import kernelagent.tools.batch.runner as runner
    from kernelagent.agent.providers.replay import ReplayProvider
    from tests.fakes.agent_kit import kernel, reply

    monkeypatch.setattr(runner, "Shard", FakeShard)
    folder = tmp_path / "p"
    folder.mkdir()
    for name in ("relu", "scale"):
        shutil.copy(PROBLEMS / "corpus" / f"{name}.py", folder / f"{name}.py")
    script = [{"text": reply(kernel("ok speedup=1.7", tag=str(i)))} for i in range(2)]
    opts = BatchOptions(mode="optimize", device="cpu", optimize={"turns": 1, "candidates": 1},
                        out_dir=str(tmp_path / "out"))
    events = []
    with open_store(tmp_path / "home") as store:
        summary = BatchRunner(store, discover([folder]), opts, progress=events.append,
                              provider=ReplayProvider(script)).run()
        assert (summary["evaluated"], summary["correct"]) == (2, 2)
        assert summary["eager"]["geomean_speedup"] == pytest.approx(1.7)
        runs = store.runs(batch_id=summary["batch_id"])
        assert sorted(r["problem"] for r in runs) == ["relu", "scale"] and {r["kind"] for r in runs} == {"optimize"}
        assert sorted(p.name for p in (tmp_path / "out").glob("*.py")) == ["relu_triton.py", "scale_triton.py"]
        assert any(e["event"] == "agent.turn" for e in events)
        again = BatchRunner(store, discover([folder]), opts, provider=ReplayProvider([])).run()  # nothing bought
        assert again == summary
