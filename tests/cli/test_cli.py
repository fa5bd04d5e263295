"""The command line: exit codes, --json documents, the offline optimize path, library and history."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.paths import PROBLEMS, SOFTMAX_PROBLEM, WRONG, softmax_case

ROOT = Path(__file__).resolve().parents[2]


def ka(*args: str, home: Path, timeout: float = 600, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.endswith("_BASE_URL")}
    env.update(KERNELAGENT_HOME=str(home), COLUMNS="120", **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "kernelagent.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)


def test_verify_exit_codes_and_json(tmp_path):
    ok = ka("verify", str(softmax_case("good")), "--ref", str(SOFTMAX_PROBLEM), "--json", "--seeds", "1",
            "--device", "cpu", home=tmp_path)
    assert ok.returncode == 0, ok.stderr
    report = json.loads(ok.stdout)
    assert report["verdict"] == "accepted" and report["category"] == "ok"
    bad = ka("verify", str(softmax_case("mismatch_mask")), "--ref", str(SOFTMAX_PROBLEM), "--seeds", "1",
             "--device", "cpu", home=tmp_path)
    assert bad.returncode == 1
    assert "REJECTED" in bad.stdout and "mismatch" in bad.stdout
    missing = ka("verify", str(softmax_case("good")), "--ref", str(tmp_path / "nope.py"), home=tmp_path)
    assert missing.returncode == 2 and "does not exist" in (missing.stdout + missing.stderr)
    usage = ka("verify", str(softmax_case("good")), "--ref", str(SOFTMAX_PROBLEM), "--device", "gpu", home=tmp_path)
    assert usage.returncode == 2 and "--device" in usage.stderr
    assert "Traceback" not in missing.stderr + usage.stderr
    hist = json.loads(ka("history", "--json", home=tmp_path).stdout)  # CLI verifies are kept in the history
    assert sorted(h["verdict"] for h in hist) == ["accepted", "rejected"]


def test_a_cute_file_verified_without_a_gpu_exits_4_and_is_never_called_accepted(tmp_path):
    """The red team's decoy (a Triton kernel writing zeros beside a CuTe kernel doing nothing) on CPU: compiled,
    never run, so the verdict is `unverified` with exit 4, in the JSON, the panel and the history alike."""
    decoy = WRONG / "dynamic" / "cute_triton_zeros_no_gpu.py"
    problem = PROBLEMS / "corpus" / "softmax.py"
    res = ka("verify", str(decoy), "--ref", str(problem), "--json", "--seeds", "1", "--device", "cpu", home=tmp_path)
    assert res.returncode == 4, res.stderr[-2000:]
    report = json.loads(res.stdout)
    assert (report["verdict"], report["category"]) == ("unverified", "compile_only")
    assert report["metrics"]["compile_only"] is True and report["feedback"].startswith("COMPILED, NOT VERIFIED")
    shown = ka("verify", str(decoy), "--ref", str(problem), "--seeds", "1", "--device", "cpu", home=tmp_path)
    assert shown.returncode == 4 and "COMPILED, NOT VERIFIED (no GPU)" in shown.stdout
    assert "ACCEPTED" not in shown.stdout and "REJECTED" not in shown.stdout
    hist = json.loads(ka("history", "--json", home=tmp_path).stdout)
    assert [h["verdict"] for h in hist] == ["unverified", "unverified"]


def test_optimize_offline_finds_the_library_softmax(tmp_path):
    out = tmp_path / "kernel.py"
    res = ka("optimize", str(ROOT / "examples" / "softmax" / "op.py"), "--out", str(out), "--json",
             home=tmp_path, env_extra={"KERNELAGENT_PROVIDER": ""})
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert doc["mode"] == "offline" and doc["library_entry"] == "softmax" and doc["accepted"]
    assert doc["report"]["verdict"] == "accepted"
    assert "ANTHROPIC_API_KEY" in doc["provider_help"]
    assert out.read_text() == (ROOT / "kernelagent" / "kernels" / "softmax" / "triton.py").read_text()


def test_optimize_offline_binds_a_matched_option(tmp_path):
    """Causal attention as most code writes it (F.scaled_dot_product_attention on (B, H, S, D)) is found offline as
    the attention entry with layout="bhsd", causal=True: the kernel verified on the problem and written is the
    library's with those defaults."""
    out = tmp_path / "kernel.py"
    res = ka("optimize", str(PROBLEMS / "library_match" / "attention_sdpa.py"), "--out", str(out), "--json",
             home=tmp_path, env_extra={"KERNELAGENT_PROVIDER": ""})
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert doc["library_entry"] == "attention" and doc["accepted"], doc
    assert doc["options"] == {"layout": "bhsd", "causal": True}, doc["options"]
    assert any("causal=True bound" in c for c in doc["checked"]), doc["checked"]
    forward = out.read_text().split("class ModelNew")[-1]
    assert "causal: bool = True" in forward and "layout: str = 'bhsd'" in forward
    written = hashlib.sha256(out.read_text().encode()).hexdigest()
    assert written == doc["report"]["candidate"]["sha256"]  # what was verified is what was written


def test_library_list_and_show(tmp_path):
    res = ka("library", "list", "--json", home=tmp_path)
    names = {e["name"] for e in json.loads(res.stdout)}
    assert {"softmax", "rms_norm", "cross_entropy"} <= names
    show = ka("library", "show", "nope", home=tmp_path)
    assert show.returncode == 2 and "no library entry" in show.stderr


def test_history_empty_and_doctor(tmp_path):
    res = ka("history", "--json", home=tmp_path)
    assert res.returncode == 0 and json.loads(res.stdout) == []
    shown = ka("history", "show", "abc", home=tmp_path)
    assert shown.returncode == 1
    doc = ka("doctor", "--json", home=tmp_path, env_extra={"ANTHROPIC_API_KEY": "sk-test-secret-123"})
    info = json.loads(doc.stdout)
    assert info["api_keys"]["ANTHROPIC_API_KEY"] is True
    assert "sk-test-secret-123" not in doc.stdout


def test_a_refused_device_leaves_no_early_worker_behind(tmp_path):
    """The CLI starts its worker before it knows the options are usable; a refusal closes it again."""
    import pytest
    import torch

    if torch.cuda.is_available():
        pytest.skip("the refusal needs a machine without a GPU")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    res = ka("verify", str(softmax_case("good")), "--ref", str(SOFTMAX_PROBLEM), "--device", "cuda",
             home=tmp_path, env_extra={"KERNELAGENT_SCRATCH": str(scratch)})
    assert res.returncode == 2 and "no CUDA GPU is visible" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    assert not [p.name for p in scratch.iterdir() if p.name.startswith("ka-worker-")]
