"""Verifies candidates from a fresh parent process whose start-up environment holds a fake API key.

    python tests/corpus/_driver.py OUT.json CANDIDATE [CANDIDATE ...]

The escape tests need a parent like the real CLI: one exec'd with secrets in its environment (a value
set later through os.environ never shows in /proc/<pid>/environ). Each candidate names its problem
(`# problem: NAME` -> problems/NAME.py); the reports are written to OUT.json, keyed by file stem.
"""

import json
import os
import re
import sys
from pathlib import Path

from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.sandbox.pool import WorkerPool

PROBLEMS = Path(__file__).resolve().parents[2] / "problems" / "corpus"


def problem_of(candidate: Path) -> Path:
    match = re.search(r"^# problem: (\w+)", candidate.read_text(), re.MULTILINE)
    if match is None:
        raise SystemExit(f"{candidate} has no '# problem:' line")
    return PROBLEMS / f"{match.group(1)}.py"


def main() -> None:
    out, candidates = Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]]
    options = VerifyOptions(device="cpu", timeout=60, seeds=2, static_policy=False)
    result = {"parent_has_key": bool(os.environ.get("ANTHROPIC_API_KEY")), "reports": {}}
    with Verifier(options, pool=WorkerPool(size=1)) as v:
        v.pool.warm("cpu", "aot")
        for cand in candidates:
            result["reports"][cand.stem] = v.verify(problem_of(cand), cand).to_dict()
    out.write_text(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
