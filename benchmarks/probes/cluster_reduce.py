"""Probe (H200): the CuTe DSL softmax forward at wide rows with its cluster reductions done two ways —
the row engine's (a cluster barrier, then DSMEM loads) and through mbarriers completed by the peers'
st.async pushes (one round trip, no barrier; softmax/cute.py ASYNC_CLUSTER_REDUCE) — checked against
torch.softmax, then timed by the verifier's method in one run. Writes cluster_reduce.json to $OUT.

Run: source .carry/setup.sh && PYTHONPATH=$PWD python3 benchmarks/probes/cluster_reduce.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from benchmarks.common import METHOD, write_result  # noqa: E402
from kernelagent.kernels.softmax import cute as sm  # noqa: E402
from kernelagent.verifier.measure.timing import measure  # noqa: E402

SHAPES = ((2048, 65536), (512, 262144), (4096, 32768))


def main() -> int:
    rows = []
    for m, n in SHAPES:
        sets = [torch.randn(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
        want = torch.softmax(sets[0].float(), -1)
        for mode in (False, True):
            sm.ASYNC_CLUSTER_REDUCE = mode
            row = {"m": m, "n": n, "async": mode}
            try:
                got = sm.softmax_forward(sets[0]).float()
                row["rel_err"] = float((got - want).norm() / want.norm())
                t = measure([lambda x=x: sm.softmax_forward(x) for x in sets], rep_ms=100.0, min_reps=20)
                row.update(median_ms=t.median_ms, tb_per_s=2 * m * n * 2 / (t.median_ms * 1e-3) / 1e12)
            except Exception as e:  # noqa: BLE001 - a failing mode is a row
                row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            rows.append(row)
            print(row, flush=True)
    sm.ASYNC_CLUSTER_REDUCE = False
    write_result("cluster_reduce", {"method": METHOD, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
