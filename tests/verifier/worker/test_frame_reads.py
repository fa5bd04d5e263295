"""The audit hook's rule for frames handed out (tb_frame, gi_frame, ...): refused while candidate code is on
the stack whichever library reads them (red-team review 7: np.vectorize(getattr) read one under numpy's
frame), except a traceback read by the compilers' own error paths (Triton's filter_traceback runs on every
failed compile, with the candidate's forward below it: refusing it would turn compile errors into policy
violations). The hook is irremovable, so it runs in a child process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent('''
    import os, sys, tempfile, textwrap
    from kernelagent.verifier.worker import guard
    d = tempfile.mkdtemp()
    cand = os.path.join(d, "cand.py")
    open(cand, "w").write(textwrap.dedent(\'\'\'
        import numpy as np

        def failed_compile():
            from triton.compiler.compiler import filter_traceback
            try:
                raise ValueError("compile failed")
            except ValueError as e:
                filter_traceback(e)
            return "ok"

        def traceback_through_numpy():
            try:
                raise ValueError("x")
            except ValueError as e:
                tb = e.__traceback__
            return np.vectorize(getattr, otypes=[object])(tb, "tb_frame")

        def generator_through_numpy():
            def gen(box):
                yield np.vectorize(getattr, otypes=[object])(box[0], "gi_frame")
            box = []
            g = gen(box)
            box.append(g)
            return next(g)
    \'\'\'))
    state = guard.GuardState(workdir=d, candidate_file=cand)
    guard.install_audit_hook(state)
    ns = {}
    exec(compile(open(cand).read(), cand, "exec"), ns)
    state.active = True
    for name in ("failed_compile", "traceback_through_numpy", "generator_through_numpy"):
        try:
            ns[name]()
            print(name, "allowed")
        except PermissionError:
            print(name, "refused")
''')


def test_frames_handed_out_through_a_library_are_refused_but_compile_errors_are_not():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    verdicts = dict(line.split() for line in out.stdout.splitlines())
    assert verdicts == {"failed_compile": "allowed", "traceback_through_numpy": "refused",
                        "generator_through_numpy": "refused"}, out.stdout
