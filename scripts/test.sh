#!/usr/bin/env bash
# Set up a virtual environment and run the test suite (the README's test command).
# CPU-only: tests marked `gpu` are skipped here and run on the H200 (see README, "GPU tests").
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "torch==2.13.0"          # the CPU wheel (a plain `torch` may pull CUDA)
.venv/bin/python -m pip install -q -e ".[dev,cute,ray]"
.venv/bin/python -m ruff check kernelagent tests benchmarks examples
# exit code 5 (no tests collected) fails this script like any other failure
# two workers (the CI machine has 2 cores); a file stays on one worker, so module-scoped set-ups run once
.venv/bin/python -m pytest -q -n "${KA_TEST_JOBS:-2}" --dist loadfile "$@"
