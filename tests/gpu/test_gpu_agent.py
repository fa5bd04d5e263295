"""A replayed optimize session on the GPU: the real verifier times each accepted candidate.

Needs the agent's dependencies on the GPU machine (carry them: scripts/gpu_wheels.sh).
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.cli.test_cli import ka
from tests.paths import SOFTMAX_PROBLEM, softmax_case

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(importlib.util.find_spec("langgraph") is None,
                                                  reason="langgraph not installed (carry scripts/gpu_wheels.sh)")]


def test_replayed_session_with_real_timing(tmp_path):
    script = tmp_path / "script.jsonl"
    reply = lambda name: f"```python\n{(softmax_case(name)).read_text()}```\n"  # noqa: E731
    script.write_text("".join(json.dumps({"text": reply(n), "input_tokens": 900, "output_tokens": 300}) + "\n"
                              for n in ("mismatch_mask.py", "good.py", "good.py")))
    res = ka("optimize", str(SOFTMAX_PROBLEM), "--provider", "replay", "--script", str(script), "--turns", "3",
             "--candidates", "1", "--beam", "1", "--out", str(tmp_path / "k.py"), "--json", home=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert doc["speed_measured"] is True
    report = doc["best"]["report"]
    assert report["environment"]["gpu"] and report["metrics"]["candidate_ms"] > 0
    assert report["metrics"]["speedup_eager"] > 0
