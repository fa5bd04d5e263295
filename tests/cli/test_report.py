"""`kernelagent report RUN|BATCH`: one self-contained HTML page whose charts are really drawn from the data."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelagent.cli.app import app
from kernelagent.memory import batches as B
from kernelagent.memory import open_store
from kernelagent.report import svg
from kernelagent.report.data import progress, roofline_point
from tests.memory.conftest import make_report

PROBLEM = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x.relu()\n" \
          "def get_inputs():\n    return [torch.randn(4096, 4096)]\n"


def _gpu_report(verdict: str, speedup: float | None = None):
    rep = make_report(verdict, "ok" if verdict == "accepted" else "mismatch", speedup=speedup or 1.0)
    if verdict == "accepted":
        rep.metrics.update(speedup_eager_ci=[speedup * 0.9, speedup * 1.1], flops=16_777_216, min_bytes=134_217_728,
                           candidate_ms=0.04 / speedup)
    return rep


@pytest.fixture
def run_id():
    with open_store() as store:
        pid = store.upsert_problem(name="relu_big", source=PROBLEM)
        rid = store.start_run(problem_id=pid, provider="replay", model="m", backend="triton", budget={})
        first = store.record_attempt(run_id=rid, problem_id=pid, source="k1", report=_gpu_report("accepted", 1.2),
                                     turn=1)
        store.record_attempt(run_id=rid, problem_id=pid, source="k2", report=_gpu_report("rejected"), turn=1,
                             candidate_index=1)
        best = store.record_attempt(run_id=rid, problem_id=pid, source="def winner_<kernel>(): pass",
                                    report=_gpu_report("accepted", 2.4), turn=2, parent_id=first)
        store.update_run(rid, status="target", best_attempt_id=best, finished=True)
        return rid


def _svgs(html: str) -> list[str]:
    return re.findall(r"<svg.*?</svg>", html, flags=re.S)


def test_run_report_has_progress_intervals_roofline_and_source(run_id, tmp_path):
    out = tmp_path / "r.html"
    res = CliRunner().invoke(app, ["report", run_id[:5], "-o", str(out)])
    assert res.exit_code == 0, res.output
    html = out.read_text()
    assert html.startswith("<!doctype html>") and "<script" not in html
    assert not re.search(r"\b(src|href)=", html)  # self-contained: nothing is fetched
    charts = _svgs(html)
    assert len(charts) == 3
    progress_svg, speed_svg, roof_svg = charts
    assert 'class="series"' in progress_svg and progress_svg.count("<circle") == 2  # turns 1 and 2
    assert speed_svg.count('class="ci"') == 2 and speed_svg.count("<circle") == 2  # the two timed attempts
    assert roof_svg.count('class="kernel"') == 2 and 'class="roof"' in roof_svg
    assert "def winner_&lt;kernel&gt;(): pass" in html  # the winning source, escaped
    assert "2.4x [2.16, 2.64]" in html


def test_batch_report_has_fast_p_and_the_distribution(tmp_path):
    problems = [tmp_path / f"p{i}.py" for i in range(3)]
    for i, problem in enumerate(problems):
        problem.write_text(PROBLEM + f"SIZE = {i}\n")  # comments do not change a problem's identity
    with open_store() as store:
        bid, _ = B.open_batch(store, mode="verify", inputs=[str(p) for p in problems], options={})
        for i, (problem, speed) in enumerate(zip(problems, (0.8, 1.3, 3.0), strict=True)):
            B.record_verification(store, problem_path=problem, problem_name=f"p{i}", candidate_source=f"k{i}",
                                  report=_gpu_report("accepted", speed), batch_id=bid, candidate_path=f"k{i}.py")
        B.finish_batch(store, bid, B.summary_of(store, bid))
    out = tmp_path / "b.html"
    res = CliRunner().invoke(app, ["report", bid[:6], "--out", str(out)])
    assert res.exit_code == 0, res.output
    html = out.read_text()
    assert "fast_1.5" in html and "torch.compile" in html
    assert "<td>66.7%</td><td>33.3%</td>" in html  # fast_1 and fast_1.5 against eager: 2 and 1 of 3
    eager_hist = _svgs(html)[0]
    assert sum(int(n) for n in re.findall(r": (\d+)</title></rect>", eager_hist)) == 3


def test_unknown_id_is_one_line(tmp_path):
    res = CliRunner().invoke(app, ["report", "nope"])
    assert res.exit_code == 1 and "no run or batch" in res.output


def test_charts_without_gpu_timings_say_so():
    assert "speed not measured" in svg.speedup_chart("s", [{"x": 1, "y": None}])
    assert "speed not measured" in svg.histogram("h", [])
    assert progress([{"turn": 1, "verdict": "accepted", "speedup_eager": None}])[0]["best_speedup"] is None
    assert roofline_point({"id": "a" * 12, "verdict": "accepted", "candidate_ms": None, "metrics": {}}) is None


def test_roofline_point_is_flops_over_bytes_and_time():
    p = roofline_point({"id": "a" * 12, "verdict": "accepted", "candidate_ms": 2.0,
                        "metrics": {"flops": 4e12, "min_bytes": 1e9}})
    assert p["intensity"] == pytest.approx(4000.0) and p["gflops"] == pytest.approx(2e6)


def test_report_file_defaults_to_the_current_folder(run_id, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["report", run_id])
    assert res.exit_code == 0, res.output
    assert Path(tmp_path / f"kernelagent-run-{run_id[:8]}.html").is_file()
