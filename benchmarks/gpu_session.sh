#!/usr/bin/env bash
# One batched GPU session on the H200 (device tool): everything that needs CUDA, results under $OUT.
#   source .carry/setup.sh && bash benchmarks/gpu_session.sh
set -uo pipefail
export PYTHONPATH=$PWD:${PYTHONPATH:-}
export KERNELAGENT_HOME=${OUT:-/tmp}/kahome
mkdir -p "$KERNELAGENT_HOME"
t0=$(date +%s)
budget=${GPU_SESSION_BUDGET:-420}
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
step doctor 60 python3 -m kernelagent.cli doctor --measure --json
cp "$KERNELAGENT_HOME/ceilings.json" "$OUT/ceilings.json" 2>/dev/null
step examples 200 python3 benchmarks/examples_gpu.py
step gpu-tests 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu tests/verifier --timeout 120 -o addopts="" --import-mode=importlib
step timing 60 python3 benchmarks/timing_method.py
step cost 90 python3 benchmarks/verifier_cost.py
echo "total $(( $(date +%s) - t0 ))s"
