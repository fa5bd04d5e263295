"""benchmarks/batch_gpu.py on the CPU with a small folder: every verification leaves the result so far (a
time limit must not lose the verdicts and messages of a long GPU batch), and a batch resumed in the same
home verifies nothing twice."""

from __future__ import annotations

import shutil

from benchmarks import batch_gpu
from tests.paths import HONEST, PROBLEMS


def test_partial_results_carry_each_verdict_and_message_and_a_resumed_batch_buys_nothing(tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    shutil.copy(PROBLEMS / "corpus" / "scale.py", folder / "scale.py")
    shutil.copy(HONEST / "dynamic" / "scale_weight.py", folder / "scale_kernel_good.py")
    wrong = (HONEST / "dynamic" / "scale_weight.py").read_text().replace("x * w, mask=mask)", "x + w, mask=mask)")
    (folder / "scale_kernel_bad.py").write_text(wrong)  # adds the weight instead of multiplying: a mismatch
    partials = []
    home = tmp_path / "home"
    config = batch_gpu.run_config([], seeds=1, home=str(home), partial=partials.append, inputs=[folder], device="cpu")
    by_name = {i["candidate_path"].rsplit("/", 1)[-1]: i for i in config["items"]}
    assert by_name["scale_kernel_good.py"]["verdict"] == "accepted"
    assert by_name["scale_kernel_bad.py"]["verdict"] == "rejected" and by_name["scale_kernel_bad.py"]["message"]
    assert [len(p["items"]) for p in partials] == [1, 2]  # written after each verification
    assert all(i["verdict"] and i["message"] for p in partials for i in p["items"])
    assert partials[0]["summary"] is None
    again = batch_gpu.run_config([], seeds=1, home=str(home), partial=partials.append, inputs=[folder], device="cpu")
    assert len(partials) == 2 and again["summary"] == config["summary"]  # resumed: nothing verified again


def test_library_rows_from_the_batch_can_be_recorded_like_a_reverification(tmp_path, monkeypatch):
    """The cards' `verified` lists are filled from the GPU batch's stored reports, not by verifying twice."""
    home = tmp_path / "home"
    entry = home / "library" / "scale"
    entry.mkdir(parents=True)
    shutil.copy(PROBLEMS / "corpus" / "scale.py", entry / "reference.py")
    shutil.copy(HONEST / "dynamic" / "scale_weight.py", entry / "triton.py")
    (entry / "card.json").write_text('{"name": "scale", "summary": "x * w", "verified": []}')
    monkeypatch.setenv("KERNELAGENT_HOME", str(home))
    config = batch_gpu.run_config([], seeds=1, home=str(home), inputs=[entry], device="cpu")
    rows = batch_gpu.library_rows(home, config["summary"]["batch_id"])
    assert [(r["name"], r["backend"], r["verdict"]) for r in rows] == [("scale", "triton", "accepted")]
    assert rows[0]["row"]["device"] == "cpu" and rows[0]["row"]["trials"] >= 1 and rows[0]["drift"] == []
    from kernelagent.tools.library import record
    assert record(rows) == ["scale"]
    assert '"backend": "triton"' in (entry / "card.json").read_text()
