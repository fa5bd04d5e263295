"""The agent end to end with the real verifier (CPU): replayed LLM turns, memory rows, history CLI."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_cli import ka
from tests.paths import SOFTMAX_PROBLEM, softmax_case


def _reply(name: str) -> str:
    return f"Plan: a one-program-per-row softmax.\n\n```python\n{(softmax_case(name)).read_text()}```\n"


def test_replayed_session_compile_error_then_mismatch_then_accepted(tmp_path):
    script = tmp_path / "script.jsonl"
    turns = ["compile_error.py", "mismatch_mask.py", "good.py"]
    script.write_text("".join(json.dumps({"text": _reply(t), "input_tokens": 1000, "output_tokens": 400}) + "\n"
                              for t in turns))
    out = tmp_path / "kernel.py"
    res = ka("optimize", str(SOFTMAX_PROBLEM), "--provider", "replay", "--script", str(script), "--turns", "4",
             "--candidates", "1", "--beam", "1", "--out", str(out), "--json", "--device", "cpu", home=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert doc["status"] == "accepted_unmeasured"
    assert out.read_text() == (softmax_case("good")).read_text()
    hist = json.loads(ka("history", "--json", home=tmp_path).stdout)
    cats = [row["category"] for row in sorted(hist, key=lambda r: r["turn"])]
    assert cats == ["compile_error", "mismatch", "ok"], cats
    first = ka("history", "show", hist[0]["id"][:8], "--json", home=tmp_path)
    assert first.returncode == 0 and json.loads(first.stdout)["source"]
    assert Path(doc["report_path"]).exists()


def test_json_lines_streams_one_event_per_line_and_ends_finished(tmp_path):
    """`optimize --json-lines`: every stdout line is a JSON event (format v1); the last is `finished`."""
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"text": _reply("good.py"), "input_tokens": 1000, "output_tokens": 400}) + "\n")
    res = ka("optimize", str(SOFTMAX_PROBLEM), "--provider", "replay", "--script", str(script), "--turns", "1",
             "--candidates", "1", "--beam", "1", "--out", str(tmp_path / "k.py"), "--json-lines", "--device", "cpu",
             home=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    events = [json.loads(line) for line in res.stdout.splitlines()]
    assert all(e["v"] == 1 and "time" in e for e in events)
    names = [e["event"] for e in events]
    assert names[0] == "start" and "verified" in names and names[-1] == "finished"
    assert events[-1]["accepted"] is True
