#!/usr/bin/env bash
# One batched GPU session on the H200 (device tool): everything that needs CUDA, results under $OUT.
#   source .carry/setup.sh && bash benchmarks/gpu_session.sh          (carry .carry: CuTe DSL + peers)
#   bash benchmarks/gpu_session.sh agent                              (carry .whl from scripts/gpu_wheels.sh:
#                                                                      the replayed agent session; the two
#                                                                      bundles together exceed 64 MiB)
set -uo pipefail
export PYTHONPATH=$PWD:${PYTHONPATH:-}
export KERNELAGENT_HOME=${OUT:-/tmp}/kahome
mkdir -p "$KERNELAGENT_HOME"
t0=$(date +%s)
budget=${GPU_SESSION_BUDGET:-540}
left() { echo $(( budget - ($(date +%s) - t0) )); }
step() {  # step NAME SECONDS CMD...: runs CMD with a timeout if time is left
  local name=$1 secs=$2; shift 2
  if [ "$(left)" -lt 20 ]; then echo "== skip $name (out of time)"; return; fi
  [ "$secs" -gt "$(left)" ] && secs=$(left)
  echo "== $name (limit ${secs}s)"
  timeout -k 5 "$secs" "$@" 2>&1 | tail -n 60
  echo "== $name rc=${PIPESTATUS[0]} at $(( $(date +%s) - t0 ))s"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
if [ "${1:-}" = agent ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
  export PYTHONPATH=$PWD:/tmp/site
  step agent 300 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_agent.py -o addopts="" --import-mode=importlib
  exit 0
fi
step doctor 60 python3 -m kernelagent.cli doctor --measure --json
cp "$KERNELAGENT_HOME/ceilings.json" "$OUT/ceilings.json" 2>/dev/null
step gpu-tests 180 python3 -m pytest -q -m "gpu or cute" -p no:cacheprovider tests/gpu tests/verifier tests/prompts --timeout 120 -o addopts="" --import-mode=importlib
step examples 150 python3 benchmarks/examples_gpu.py
step cost 70 python3 benchmarks/verifier_cost.py
step timing 40 python3 benchmarks/timing_method.py
step peers 120 python3 benchmarks/library_peers.py
echo "total $(( $(date +%s) - t0 ))s"
