"""What a verify costs from an editor or a coding agent, on the GPU: the CLI in fresh processes, and the MCP server.

(a) `kernelagent verify examples/softmax/kernel.py --ref problems/bench/softmax_16x16384.py --json` (1 MiB
    fp32, timing on) in a new process each time: the first call with an empty $KERNELAGENT_HOME (it starts
    the resident verifier, which builds the reference pack and baselines and stores them), then calls in new
    processes served by it (target: <= 5 s); then the same warm calls with `--daemon off` (everything in the
    CLI's own process and a worker it starts).
(b) the same through `kernelagent mcp` over stdio with the official `mcp` client: warm verify latency
    (target: <= 1.5 s), and 4 candidates of the problem verified at once (target: <= 3 s wall; timed runs
    take turns on the GPU).

    python benchmarks/cli_mcp_cost.py [--repeats 3] [--concurrent 4]   # writes $OUT/cli_mcp_cost.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import write_result

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ROOT / "examples" / "softmax" / "kernel.py"
PROBLEM = ROOT / "problems" / "bench" / "softmax_16x16384.py"


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "KERNELAGENT_HOME": str(home), "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}


def _row(wall: float, report: dict[str, Any]) -> dict[str, Any]:
    stages = {s["name"]: s["seconds"] for s in report.get("stages", [])}
    m = report.get("metrics", {})
    return {"wall_s": round(wall, 3), "verdict": report.get("verdict"), "category": report.get("category"),
            "verify_seconds": m.get("verify_seconds"), "reference_s": stages.get("reference"),
            "candidate_ms": m.get("candidate_ms"), "speedup_eager": m.get("speedup_eager"),
            "cost_seconds": m.get("cost_seconds"), "stages": stages, "timing_phases_s": m.get("timing_phases_s"),
            "timed_calls": m.get("timed_calls"), "timing_method": m.get("timing_method")}


def cli_calls(home: Path, repeats: int, device: str, daemon: str, first: bool = True) -> dict[str, Any]:
    """One cold call (when `first`), then `repeats` calls in new processes with the cache warm; `daemon` is
    the CLI's --daemon mode (on: the resident verifier, started by the first call; off: all in the process)."""
    cmd = [sys.executable, "-m", "kernelagent.cli", "verify", str(KERNEL), "--ref", str(PROBLEM), "--json",
           "--device", device, "--daemon", daemon]
    rows: list[dict[str, Any]] = [{}] if not first else []
    for i in range(len(rows), repeats + 1):
        t = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=_env(home), timeout=600)
        wall = time.perf_counter() - t
        try:
            report = json.loads(res.stdout)
        except json.JSONDecodeError:
            report = {"verdict": None, "category": f"exit {res.returncode}: {res.stderr[-500:]}"}
        rows.append(_row(wall, report))
        print("cli", "first" if i == 0 else "warm", rows[-1], flush=True)
    warm = [r["wall_s"] for r in rows[1:]]
    return {"daemon": daemon, "first": rows[0] or None, "warm": rows[1:],
            "warm_median_s": sorted(warm)[len(warm) // 2] if warm else None, "target_warm_s": 5.0}


def stop_daemons(home: Path) -> None:
    subprocess.run([sys.executable, "-m", "kernelagent.cli", "daemon", "stop", "--all"], cwd=ROOT, env=_env(home),
                   capture_output=True, timeout=60)


async def mcp_calls(home: Path, repeats: int, concurrent: int, device: str) -> dict[str, Any]:
    """Warm verify latency through the server, then `concurrent` candidates at once."""
    import anyio
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, cwd=str(ROOT), env=_env(home),
        args=["-m", "kernelagent.cli", "mcp", "--device", device, "--workers", str(concurrent), "--no-record"])
    source = KERNEL.read_text()

    async def verify(text: str) -> dict[str, Any]:
        t = time.perf_counter()
        res = await client.call_tool("verify", {"problem": str(PROBLEM), "candidate_source": text})
        wall = time.perf_counter() - t
        if res.is_error:
            return {"wall_s": round(wall, 3), "error": str(res.content)[:500]}
        return _row(wall, res.structured_content["report"])

    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    async with Client(params) as client:
        out["connect_s"] = round(time.perf_counter() - t0, 3)
        out["first"] = await verify(source)
        out["warm"] = []
        for i in range(repeats):
            await anyio.sleep(3.0)  # let the pool replace the worker it handed out
            out["warm"].append(await verify(source + f"\n# warm call {i}\n"))
            print("mcp warm", out["warm"][-1], flush=True)
        await anyio.sleep(8.0)      # all `concurrent` workers warm again
        rows: list[dict[str, Any]] = []

        async def one(i: int) -> None:
            rows.append(await verify(source + f"\n# concurrent candidate {i}\n"))

        t = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i in range(concurrent):
                tg.start_soon(one, i)
        out["concurrent"] = {"n": concurrent, "wall_s": round(time.perf_counter() - t, 3), "calls": rows,
                             "target_wall_s": 3.0}
        print("mcp concurrent", out["concurrent"]["wall_s"], [r.get("category") for r in rows], flush=True)
    warm = [r["wall_s"] for r in out["warm"]]
    out["warm_median_s"] = sorted(warm)[len(warm) // 2] if warm else None
    out["target_warm_s"] = 1.5
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--concurrent", type=int, default=4)
    ap.add_argument("--device", default="cuda", help="cpu only to try the script (no timing there)")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="ka-bench-home-"))
    data: dict[str, Any] = {"problem": str(PROBLEM.relative_to(ROOT)), "kernel": str(KERNEL.relative_to(ROOT)),
                            "home": str(home), "device": args.device}
    try:
        data["cli"] = cli_calls(home, args.repeats, args.device, "on")  # the first call starts the daemon
    finally:
        stop_daemons(home)
    data["cli_no_daemon"] = cli_calls(home, args.repeats, args.device, "off", first=False)
    write_result("cli_mcp_cost", data)  # kept even if the MCP part runs out of time
    try:
        import anyio
        data["mcp"] = anyio.run(mcp_calls, home, args.repeats, args.concurrent, args.device)
    except ModuleNotFoundError as e:
        data["mcp"] = {"skipped": f"{e.name} is not installed (pip install 'mcp>=2.3,<3')"}
    path = write_result("cli_mcp_cost", data)
    print("wrote", path)


if __name__ == "__main__":
    main()
