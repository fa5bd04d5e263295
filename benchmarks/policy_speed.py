"""How long the static policy takes on a 300-line candidate (the honest static corpus, concatenated).

Speed used to be asserted in the test suite (< 50 ms), which failed on a loaded machine; it is measured
here instead. Run: `python -m benchmarks.policy_speed [--rounds N]` (writes $OUT/policy_speed.json, or
benchmarks/results/).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from benchmarks.common import write_result
from kernelagent.verifier.policy.check import check_policy

HONEST = sorted((Path(__file__).resolve().parents[1] / "tests" / "corpus" / "honest" / "static").glob("*.py"))


def source_of(lines_wanted: int = 300) -> str:
    parts, lines = [], 0
    for path in HONEST:
        text = path.read_text()
        parts.append(text)
        lines += text.count("\n")
        if lines >= lines_wanted:
            break
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    source = source_of()
    seconds = []
    for _ in range(args.rounds):
        t = time.perf_counter()
        check_policy(source)
        seconds.append(time.perf_counter() - t)
    result = {"lines": source.count("\n"), "rounds": args.rounds, "best_ms": min(seconds) * 1e3,
              "median_ms": statistics.median(seconds) * 1e3, "method": "time.perf_counter around check_policy"}
    path = write_result("policy_speed", result)
    print(f"{result['lines']} lines: best {result['best_ms']:.1f} ms, median {result['median_ms']:.1f} ms -> {path}")


if __name__ == "__main__":
    main()
