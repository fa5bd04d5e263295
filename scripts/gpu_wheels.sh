#!/usr/bin/env bash
# Download the agent's pure-Python dependencies as wheels for the H200 machine's Python 3.12 into the
# ignored folder .whl/ (the GPU image has torch/triton/typer/rich but not langgraph, anthropic,
# sqlite-utils). On the GPU: python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qxF '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
mkdir -p .whl
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl "langgraph>=0.3" "langgraph-checkpoint-sqlite>=2.0" "anthropic>=0.40" "sqlite-utils>=3.36" \
  "mcp>=2.3,<3" "tenacity>=8.2"
# drop what the GPU image already has (two versions of one package break the install there)
rm -f .whl/{numpy,typing_extensions,click,rich,typer,httpx,httpcore,anyio,idna,certifi,h11,pygments,markdown_it_py,mdurl,shellingham,tabulate,python_dateutil,six,pluggy}-*.whl
# (sniffio stays: the GPU image lacks it and langsmith, imported by langgraph, needs it)
du -sh .whl
