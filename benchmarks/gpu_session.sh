#!/usr/bin/env bash
# Batched GPU work on the H200 (device tool): everything that needs CUDA, results and full logs under $OUT.
#   source .carry/setup.sh && bash benchmarks/gpu_session.sh [STEP...]     (carry .carry: CuTe DSL + peers)
#   bash benchmarks/gpu_session.sh agent [STEP...]                        (carry .whl from scripts/gpu_wheels.sh:
#                                                                          the replayed agent session; the two
#                                                                          bundles together exceed 64 MiB)
# STEPs: doctor probe tests examples cost timing imports sanprobe peers agent confine ccost rowwise losses attention
#        attnbwd ncu clicost audit batch (default: doctor tests examples cost timing peers). `audit` reads KernelBench's level
#        folders from .kb/KernelBench (carry .kb); clicost needs the .whl bundle (mcp). `batch` needs only
#        sqlite-utils: put its three wheels in the CuTe DSL bundle so that CuTe DSL candidates run too
#        (cp .whl/{sqlite_utils,sqlite_fts4,click_default_group}-*.whl .carry/whl/); 19 verifications of
#        about 20 s each want BATCH_LIMIT=540 in a call of their own.
# EXAMPLES_ONLY picks examples by path fragment, COST_CASES the verifier-cost cases (imports, small, large). TEST_PATHS / TEST_PATHS2 pick what `tests` / `tests2` run; PROBE lists OP:KERNEL[:flags] pairs for `probe` (benchmarks/probes/gpu_probe.py).
set -uo pipefail
export PYTHONPATH=$PWD:${PYTHONPATH:-}
OUT=${OUT:-/tmp/ka-out}
export KERNELAGENT_HOME=$OUT/kahome
mkdir -p "$KERNELAGENT_HOME" "$OUT/logs"
# ceilings measured earlier on this GPU, until `doctor --measure` replaces them
latest=$(ls -d benchmarks/results/*-h200 2>/dev/null | sort | tail -n 1)
[ -n "$latest" ] && cp "$latest/ceilings.json" "$KERNELAGENT_HOME/ceilings.json" 2>/dev/null
t0=$(date +%s)
budget=${GPU_SESSION_BUDGET:-560}
left() { echo $(( budget - ($(date +%s) - t0) )); }
step() {  # step NAME SECONDS CMD...: runs CMD with a timeout if time is left; full log in $OUT/logs
  local name=$1 secs=$2; shift 2
  if [ "$(left)" -lt 20 ]; then echo "== skip $name (out of time)"; return; fi
  [ "$secs" -gt "$(left)" ] && secs=$(left)
  echo "== $name (limit ${secs}s)"
  timeout -k 5 "$secs" "$@" > "$OUT/logs/$name.log" 2>&1
  local rc=$?
  tail -n 40 "$OUT/logs/$name.log"
  echo "== $name rc=$rc at $(( $(date +%s) - t0 ))s"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
PYTEST=(env PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python3 -m pytest -q -p no:cacheprovider -o addopts="" --import-mode=importlib -rfEs)
export KA_EAGER_FAILURES=1
export KERNELAGENT_DAEMON=${KERNELAGENT_DAEMON:-off}  # CLI calls in tests run in their process (clicost picks its own mode)
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
  export PYTHONPATH=$PWD:/tmp/site
fi
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(doctor tests examples cost timing peers)
for s in "${steps[@]}"; do
  case $s in
    doctor) step doctor 60 python3 -m kernelagent.cli doctor --measure --json
            cp "$KERNELAGENT_HOME/ceilings.json" "$OUT/ceilings.json" 2>/dev/null ;;
    probe) step probe 200 python3 benchmarks/probes/gpu_probe.py ${PROBE:-} ;;
    tests) step tests ${TESTS_LIMIT:-420} "${PYTEST[@]}" -m "${TEST_MARK:-gpu or cute}" ${TEST_PATHS:-tests/verifier tests/corpus tests/prompts tests/gpu tests/kernels} \
             --junitxml="$OUT/gpu-tests.xml" ;;
    tests2) step tests2 ${TESTS2_LIMIT:-260} "${PYTEST[@]}" -m "${TEST_MARK:-gpu or cute}" ${TEST_PATHS2:-tests/gpu} \
             --junitxml="$OUT/gpu-tests2.xml" ;;
    diag) step diag 40 python3 benchmarks/probes/side_stream_diag.py ;;
    agent) step agent ${AGENT_LIMIT:-300} "${PYTEST[@]}" tests/gpu/test_gpu_agent.py ;;
    examples) step examples ${EXAMPLES_LIMIT:-150} python3 benchmarks/examples_gpu.py ${EXAMPLES_ONLY:-} ;;
    cost) step cost ${COST_LIMIT:-200} python3 benchmarks/verifier_cost.py ${COST_CASES:-} ;;
    timing) step timing 40 python3 benchmarks/timing_method.py ;;
    sanprobe) step sanprobe 120 python3 benchmarks/probes/sanitizer_probe.py ;;
    imports) step imports ${IMPORTS_LIMIT:-200} python3 benchmarks/import_profile.py ;;
    peers) step peers 150 python3 benchmarks/library_peers.py ;;
    confine) step confine ${CONFINE_LIMIT:-240} python3 -m benchmarks.probes.confinement_probe ;;
    ccost) step ccost ${CCOST_LIMIT:-120} python3 benchmarks/confinement_cost.py --device cuda ${CCOST_ARGS:-} ;;
    rowwise) step rowwise ${ROWWISE_LIMIT:-200} python3 benchmarks/rowwise_peers.py ${ROWWISE_ARGS:---budget 150} ;;
    losses) step losses ${LOSSES_LIMIT:-200} python3 benchmarks/losses_peers.py ;;
    attention) step attention ${ATTENTION_LIMIT:-200} python3 benchmarks/attention_peers.py --quick --budget 150 --out "$OUT" ;;
    clicost) step clicost ${CLICOST_LIMIT:-150} python3 benchmarks/cli_mcp_cost.py ;;
    attnbwd) step attnbwd ${ATTNBWD_LIMIT:-200} python3 benchmarks/probes/attention_bwd.py ;;
    ncu) for op in ${NCU_OPS:-ce attention}; do  # Nsight Compute, one call of each op (benchmarks/probes/ncu_target.py)
           step "ncu_$op" ${NCU_LIMIT:-130} sh -c "$(command -v ncu || echo /usr/local/cuda/bin/ncu) --profile-from-start off --section SpeedOfLight \
             --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats \
             --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct --csv --page details \
             python3 benchmarks/probes/ncu_target.py $op > '$OUT/ncu_$op.csv'"
         done ;;
    audit) step audit ${AUDIT_LIMIT:-300} python3 -m benchmarks.audit_kernelbench .kb/KernelBench --jobs 8 ;;
    batch) step batch ${BATCH_LIMIT:-150} python3 benchmarks/batch_gpu.py ;;
    *) echo "unknown step $s" ;;
  esac
done
echo "total $(( $(date +%s) - t0 ))s"
