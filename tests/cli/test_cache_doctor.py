"""`kernelagent cache`, `--version`, `doctor`'s paths, and `--json` on every command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import typer

from kernelagent import __version__
from kernelagent.cli.app import app
from tests.paths import REPO, SOFTMAX_PROBLEM, softmax_case

# commands whose machine output is not one JSON document, and why
NO_JSON = {"mcp": "speaks JSON-RPC (MCP) on stdout", "history export": "JSON lines (--format jsonl)",
           "report": "writes an HTML file", "daemon serve": "a server in the foreground (its log is its output)"}


def ka(*args: str, home: Path, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(KERNELAGENT_HOME=str(home), COLUMNS="160", **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "kernelagent.cli", *args], capture_output=True, text=True,
                          timeout=600, cwd=REPO, env=env)


def _commands(cmd, prefix: str = ""):
    if hasattr(cmd, "commands"):
        for name, sub in cmd.commands.items():
            yield from _commands(sub, f"{prefix}{name} ")
    else:
        yield prefix.strip(), [o for p in cmd.params for o in getattr(p, "opts", [])]


def test_every_command_has_json_output():
    commands = dict(_commands(typer.main.get_command(app)))
    assert {"verify", "audit", "doctor", "cache info", "cache clear", "mcp"} <= set(commands)
    missing = sorted(name for name, opts in commands.items() if "--json" not in opts and name not in NO_JSON)
    assert missing == []


def test_version():
    res = subprocess.run([sys.executable, "-m", "kernelagent.cli", "--version"], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == f"kernelagent {__version__}"


def test_doctor_shows_where_things_live(tmp_path):
    res = ka("doctor", "--json", home=tmp_path)
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    paths = info["paths"]
    assert paths["home"] == str(tmp_path) and paths["database"] == str(tmp_path / "kernelagent.db")
    assert paths["config"] == str(tmp_path / "config.toml") and paths["cache"] == str(tmp_path / "cache" / "refs")
    assert Path(paths["library"], "softmax", "card.json").is_file()
    assert info["cache"]["entries"] == 0 and info["kernelagent"] == __version__
    human = ka("doctor", home=tmp_path)
    assert str(tmp_path / "kernelagent.db") in human.stdout and "cache use" in human.stdout


def test_second_verify_in_a_new_process_reuses_the_pack_then_clear(tmp_path):
    args = ("verify", str(softmax_case("good")), "--ref", str(SOFTMAX_PROBLEM), "--json", "--seeds", "1",
            "--device", "cpu")
    first = ka(*args, home=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    info = json.loads(ka("cache", "info", "--json", home=tmp_path).stdout)
    assert info["entries"] == 1 and info["list"][0]["problem"] == "softmax_cases" and info["bytes"] > 0
    used = tmp_path / "cache" / "refs" / info["list"][0]["key"] / "used"
    before = used.stat().st_mtime_ns
    second = ka(*args, home=tmp_path)
    assert second.returncode == 0 and json.loads(second.stdout)["verdict"] == "accepted"
    assert used.stat().st_mtime_ns > before   # restored from the cache, not rebuilt
    assert json.loads(ka("cache", "info", "--json", home=tmp_path).stdout)["entries"] == 1
    human = ka("cache", "info", home=tmp_path)
    assert "softmax_cases" in human.stdout and "1 pack(s)" in human.stdout
    cleared = ka("cache", "clear", "--json", home=tmp_path)
    assert json.loads(cleared.stdout)["removed"] == 1
    assert json.loads(ka("cache", "info", "--json", home=tmp_path).stdout)["entries"] == 0


def test_bad_cache_setting_is_one_line(tmp_path):
    res = ka("cache", "info", home=tmp_path, env_extra={"KERNELAGENT_CACHE_MAX_GB": "lots"})
    assert res.returncode == 2
    assert "KERNELAGENT_CACHE_MAX_GB" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
