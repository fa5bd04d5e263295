"""The DSL guides the LLM reads cannot rot: every complete ```python block in
kernelagent/prompts/cute_dsl.md is compiled for sm_90a (its `# check:` lines run under the
verifier's compile-only mode), and every one in kernelagent/prompts/triton.md runs under the Triton
interpreter with its checks and is then compiled ahead of time for sm_90, each launch with the
argument specialisation the GPU JIT would use. Children: tests/prompts/guide_child.py (~20 s in all).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.interp import single_threaded
from tests.prompts.guide_snippets import snippets, write_full

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("guide_child.py")
NUMPY_BREAKS_INTERPRETER = tuple(int(x) for x in np.__version__.split(".")[:2]) >= (2, 4)  # triton#9171
SMEM_LIMIT = 232448  # bytes of shared memory one CTA may use on sm_90 (227 KB)
MAX_FRAGMENTS = 3


def _child(args: list[str], cwd: Path, timeout: int = 600) -> dict:
    env = single_threaded({k: v for k, v in os.environ.items() if not k.startswith(("CUTE_DSL_", "TRITON_"))})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([sys.executable, str(CHILD), *args], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=str(cwd))
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("JSON:")), None)
    assert line is not None, f"{args[0]} child failed (rc {proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(line[5:])


@pytest.mark.parametrize("guide", ["cute", "triton"])
def test_blocks_are_complete_files_or_few_fragments(guide):
    blocks = snippets(guide)
    assert blocks, f"no python blocks in the {guide} guide"
    assert {b.info for b in blocks} <= {"", "fragment"}, [b.info for b in blocks]
    assert sum(b.info == "fragment" for b in blocks) <= MAX_FRAGMENTS
    for b in blocks:
        if b.info == "":
            ast.parse(b.source, filename=f"{guide} guide, block at line {b.line}")
            assert b.checks(), f"{guide} guide block at line {b.line} has no `# check:` line"
            assert "class ModelNew" in b.source, f"{guide} guide block at line {b.line} is not a candidate file"


@pytest.fixture(scope="module")
def cute_run(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("cute_guide")
    paths = write_full("cute", d)
    return _child(["cute", *map(str, paths)], d)


@pytest.mark.cute
def test_cute_guide_snippets_compile_for_sm90a(cute_run):
    assert cute_run["files"]
    for path, got in cute_run["files"].items():
        name = Path(path).name
        assert got["error"] is None, f"{name}:\n{got['error']}"
        assert got["compiles"], f"{name}: its checks compiled no kernel"
        assert got["skipped"] + got["launched"] >= 1, f"{name}: its checks launched nothing"
        for c in got["compiles"]:
            assert c["registers"] and c["spills"] == 0, f"{name}: {c}"


@pytest.fixture(scope="module")
def triton_run(tmp_path_factory) -> dict:
    if NUMPY_BREAKS_INTERPRETER:
        pytest.skip(f"numpy {np.__version__} breaks Triton 3.6's interpreter (loops with runtime bounds)")
    d = tmp_path_factory.mktemp("triton_guide")
    paths = write_full("triton", d)
    interp = _child(["triton-interp", *map(str, paths)], d)
    launches = d / "launches.json"
    launches.write_text(json.dumps(interp))
    return {"interp": interp["files"], "aot": _child(["triton-aot", str(launches)], d)["files"]}


def test_triton_guide_snippets_pass_their_checks_in_the_interpreter(triton_run):
    for path, got in triton_run["interp"].items():
        assert got["error"] is None, f"{Path(path).name}:\n{got['error']}"
        assert got["launches"], f"{Path(path).name}: its checks launched no kernel"


def test_triton_guide_snippets_compile_for_sm90(triton_run):
    for path, compiled in triton_run["aot"].items():
        name = Path(path).name
        assert compiled, f"{name}: nothing compiled"
        for c in compiled:
            assert "error" not in c, f"{name}: {c['kernel']} {c['options']}:\n{c['error']}"
            assert c["target"] == "sm_90a" and c["registers"], c
        groups: dict[str, list[dict]] = {}  # a launch's operand types; several entries = autotune configs
        for c in compiled:
            groups.setdefault(f"{c['kernel']} {c['pointers']}", []).append(c)
        for group, configs in groups.items():
            fits = [c for c in configs if c["shared"] <= SMEM_LIMIT and c["spill_stores"] == 0]
            assert fits, f"{name}: {group}: no config fits in 227 KB of shared memory without spilling"
        if "tl.dot" in Path(path).read_text():
            assert all(c["wgmma"] for c in compiled), f"{name}: tl.dot did not become wgmma for sm_90a"


@pytest.mark.gpu
def test_triton_guide_snippets_pass_their_checks_on_gpu(tmp_path):
    paths = write_full("triton", tmp_path)
    for path, got in _child(["triton-gpu", *map(str, paths)], tmp_path)["files"].items():
        assert got["error"] is None, f"{Path(path).name}:\n{got['error']}"
