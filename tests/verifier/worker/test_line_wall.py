"""The line wall: kernel code the interpreter ran must be code the AOT compile for sm_90a generated (interp_lines,
compiled_lines). A kernel that selects a branch inside itself by something it sees differently under the
interpreter (`type` of a constexpr reached through a module) computed the answer there and garbage compiled,
and was accepted on CPU (2026-12-03). The interpreter runs in a child process with the worker's patches, as a CPU
worker does; the compile runs here, as the AOT worker does."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("triton")

from kernelagent.verifier.worker import compiled_lines, interp_lines  # noqa: E402
from kernelagent.verifier.worker.compiled_lines import NotCompiled, Visits, check, dead_nodes  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
MODULE = "line_wall_kernels"

SOURCE = textwrap.dedent('''
    import triton
    import triton.language as tl


    @triton.jit
    def _pick(v, FAST: tl.constexpr):
        if FAST:
            r = v * 2.0
        else:
            r = v + v
        return r


    @triton.jit
    def honest(x_ptr, y_ptr, n, FAST: tl.constexpr, BLOCK: tl.constexpr):
        tl.static_assert(BLOCK >= 4, f"BLOCK={BLOCK} too small")
        offs = tl.arange(0, BLOCK)
        v = tl.load(x_ptr + offs, mask=offs < n,
                    other=0.0)
        if FAST:
            out = _pick(v, FAST)
        else:
            out = _pick(v, FAST) if BLOCK > 0 else v
        for _ in tl.static_range(2):
            out = out * 1.0
        tl.store(y_ptr + offs, out, mask=offs < n)


    @triton.jit
    def branch(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        v = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        out = v
        if tl.core.builtins.type(BLOCK) is int:
            out = v * 2.0
        tl.store(y_ptr + offs, out, mask=offs < n)


    @triton.jit
    def one_line(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        v = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        tl.store(y_ptr + offs, v * 2.0 if tl.core.builtins.type(BLOCK) is int else v, mask=offs < n)


    @triton.jit
    def printer(x_ptr, BLOCK: tl.constexpr):
        print("seen", tl.load(x_ptr + tl.arange(0, BLOCK)))


    @triton.jit
    def print_to_sink(x_ptr, BLOCK: tl.constexpr):
        print(tl.load(x_ptr + tl.arange(0, BLOCK)), file=SINK)


    @triton.jit
    def message(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        v = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        out = v
        tl.static_assert(BLOCK > 0, (out := v * 2.0))
        tl.store(y_ptr + offs, out, mask=offs < n)
''')

CHILD = r'''
import importlib.util, json, sys
import torch
from kernelagent.verifier.worker import integrity, interp_calls, interp_fixes
assert interp_fixes.rewrite_what_the_compiler_compiles() and interp_fixes.keep_kernel_modules_clean()
interp_calls.watch()
counter = integrity.LaunchCounter()
counter.install_triton(True)
spec = importlib.util.spec_from_file_location(sys.argv[2], sys.argv[1])
mod = importlib.util.module_from_spec(spec)
sys.modules[sys.argv[2]] = mod
spec.loader.exec_module(mod)
x, y = torch.arange(8, dtype=torch.float32), torch.empty(8)
mod.honest[(1,)](x, y, 8, FAST=True, BLOCK=8)
mod.honest[(1,)](x, y, 8, FAST=False, BLOCK=8)
for name in ("branch", "one_line", "message"):
    getattr(mod, name)[(1,)](x, y, 8, BLOCK=8)
    assert torch.equal(y, x * 2), name  # the interpreter took the branch the compile drops
mod.printer[(1,)](x + 4100, BLOCK=8)
import io
mod.SINK = io.StringIO()
try:
    mod.print_to_sink[(1,)](x + 4100, BLOCK=8)
    error = ""
except Exception as e:
    error = repr(e)
print("SINK:" + json.dumps([mod.SINK.getvalue(), error]))
print("LAUNCHES:" + json.dumps(counter.stats["interpreter_launches"]))
'''


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    """The kernels' module imported here (compiled), the launches the interpreter recorded in a child and what
    its kernels printed."""
    path = Path(tmp_path_factory.mktemp("line_wall")) / f"{MODULE}.py"
    path.write_text(SOURCE)
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path), MODULE], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    launches = json.loads(proc.stdout.split("LAUNCHES:", 1)[1])
    printed = {"stdout": proc.stdout.split("SINK:", 1)[0],
               "sink": json.loads(proc.stdout.split("SINK:", 1)[1].split("\n", 1)[0])}
    spec = importlib.util.spec_from_file_location(MODULE, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = mod
    spec.loader.exec_module(mod)
    yield mod, launches, printed
    sys.modules.pop(MODULE, None)


def _compile(mod, launch: dict) -> None:
    from kernelagent.verifier.worker.aot import compile_one, find_kernel

    compile_one(find_kernel(mod, launch), launch)


def test_the_interpreter_records_what_ran_per_launch(kernels):
    _, launches, _ = kernels
    honest = [r for r in launches if r["kernel"] == "honest"]
    assert len(honest) == 2 and all("ran" in r for r in honest)
    keys = {k.split(":")[1] for r in honest for k in r["ran"]}
    assert keys == {"honest", "_pick"}  # the kernel and the jit helper it calls; not Triton's own functions


def test_print_in_kernel_code_is_device_print(kernels):
    """Compiled, `print` in a kernel is tl.device_print; so it is under the interpreter now: it prints the values
    as device_print does, and a `file=` sink gets nothing (red team round 11 turned blocks into text in one)."""
    _, _, printed = kernels
    assert "seen" in printed["stdout"] and "4103" in printed["stdout"]
    text, error = printed["sink"]
    assert text == "" and "file" in error


def test_honest_constexpr_paths_compile_to_what_ran(kernels):
    mod, launches, _ = kernels
    for launch in (r for r in launches if r["kernel"] == "honest"):
        _compile(mod, launch)  # raises NotCompiled if a line the interpreter ran was not generated


@pytest.mark.parametrize("name,line", [("branch", "out = v * 2.0"), ("one_line", "v * 2.0 if"),
                                       ("message", "out := v * 2.0")])
def test_code_that_ran_only_under_the_interpreter_is_refused(kernels, name, line):
    mod, launches, _ = kernels
    launch = next(r for r in launches if r["kernel"] == name)
    with pytest.raises(NotCompiled, match="ran under the interpreter but is not in the kernel compiled") as info:
        _compile(mod, launch)
    assert line in str(info.value)
    number = int(str(info.value).split()[1])
    assert line in SOURCE.splitlines()[number - 1]  # the candidate file's own line number


def test_a_helper_the_compile_never_generated_is_refused(kernels):
    mod, launches, _ = kernels
    launch = json.loads(json.dumps(next(r for r in launches if r["kernel"] == "branch")))
    helper = next(k for r in launches for k in r["ran"] if ":_pick:" in k)
    launch["ran"][helper] = next(r for r in launches if r["kernel"] == "honest")["ran"][helper]
    launch["ran"] = {helper: launch["ran"][helper]}
    with pytest.raises(NotCompiled, match="_pick is never compiled in it"):
        _compile(mod, launch)


def test_a_source_other_than_the_one_that_ran_is_refused(kernels):
    mod, launches, _ = kernels
    launch = json.loads(json.dumps(next(r for r in launches if r["kernel"] == "honest")))
    for entry in launch["ran"].values():
        entry["src"] = "0" * 16
    with pytest.raises(NotCompiled, match="is not the source the interpreter ran"):
        _compile(mod, launch)


def test_a_malformed_record_fails_closed():
    with pytest.raises(NotCompiled, match="malformed"):
        check({"m:k:1": {"def": 1, "src": "x", "pos": "1,2"}}, {})
    with pytest.raises(NotCompiled, match="malformed"):
        check(["not", "a", "dict"], {})


def _visits_all_but(src: str, skipped: list[str]) -> Visits:
    """Visits of every node of `src` except those whose source text is in `skipped`."""
    tree = ast.parse(src)
    spans = {compiled_lines._span(n) for n in ast.walk(tree) if compiled_lines._span(n) is not None
             and ast.get_source_segment(src, n) not in skipped}
    return Visits(fn=None, spans=spans)


def test_dead_nodes_are_what_python_would_run_and_the_compile_skipped():
    src = "def k(x, C: tl.constexpr):\n    y = x + 1 if C else x\n    for i in range(3):\n        z = y\n"
    visits = _visits_all_but(src, ["x + 1", "range(3)", "z = y"])
    dead = {ast.get_source_segment(src, n) for n in dead_nodes(ast.parse(src), visits)}
    assert "x + 1" in dead and "z = y" in dead  # a dropped arm, a dropped statement
    assert "range(3)" not in dead  # the loop's iterator call is read, not visited, by the generator
    assert "z" not in dead and "i" not in dead  # targets go with their statements


def test_an_inert_static_assert_message_is_not_dead_but_an_assignment_in_one_is():
    src = 'def k(x):\n    tl.static_assert(True, "text")\n    tl.static_assert(True, (y := x))\n'
    tree = ast.parse(src)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    visits = _visits_all_but(src, ['"text"', "(y := x)", "y := x", "x"])
    visits.messages = {compiled_lines._span(c.args[1]) for c in calls}
    dead = {ast.get_source_segment(src, n) for n in dead_nodes(tree, visits)}
    assert '"text"' not in dead and "y := x" in dead


def test_positions_survive_encoding_and_merge():
    spans = {(3, 4, 8, 12), (5, 5, 0, 9)}
    assert interp_lines.decode(interp_lines.encode(spans)) == spans
    record: dict = {}
    interp_lines.merge_into(record, {"m:k:1": {"def": 2, "src": "d", "pos": "3,4,8,12"}})
    interp_lines.merge_into(record, {"m:k:1": {"def": 2, "src": "d", "pos": "5,5,0,9"}})
    assert interp_lines.decode(record["ran"]["m:k:1"]["pos"]) == spans
