"""Verifies candidates from a fresh parent process whose start-up environment holds a fake API key.

    python tests/cheats/dynamic/_driver.py OUT.json PROBLEM CANDIDATE [CANDIDATE ...]

The escape tests need a parent like the real CLI: one exec'd with secrets in its environment (a value
set later with os.environ is not visible in /proc/<pid>/environ). Reports are written as JSON.
"""

import json
import sys
from pathlib import Path

from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.pool import WorkerPool


def main() -> None:
    out, problem, candidates = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    options = VerifyOptions(device="cpu", timeout=60, seeds=2, static_policy=False)
    reports = {}
    with Verifier(options, pool=WorkerPool(size=1)) as v:
        v.pool.warm("cpu", "aot")
        for cand in candidates:
            reports[Path(cand).stem] = v.verify(problem, cand).to_dict()
    out.write_text(json.dumps(reports, default=str))


if __name__ == "__main__":
    main()
