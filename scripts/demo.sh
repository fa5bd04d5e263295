#!/usr/bin/env bash
# Set up and run the main job: optimise the softmax example. With no API key this takes the offline
# path (finds the library's softmax, verifies it on the example's shapes, reports).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e .
.venv/bin/kernelagent optimize examples/softmax/op.py "$@"
