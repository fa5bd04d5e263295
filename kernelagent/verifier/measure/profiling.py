"""Optional GPU stages: Nsight Compute metrics on every kernel the candidate launches (`--profile`) and
compute-sanitizer memcheck/racecheck (`--sanitize`), each in its own worker run under the tool.

The worker runs one warm-up forward, then one forward inside the NVTX range `ka_profile`; ncu is told
to profile only kernels inside that range, so the reference, the warm-up and the verifier's own
kernels are left out, and every kernel of the candidate's forward is measured (not only the first).
"""

from __future__ import annotations

import csv
import functools
import io
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

NCU_METRICS = {
    "gpu__time_duration.sum": "duration_ns",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "launch__registers_per_thread": "registers",
    "launch__grid_size": "grid",
    "launch__block_size": "block",
    "smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio": "stall_long_scoreboard",
    "smsp__average_warp_latency_issue_stalled_barrier.ratio": "stall_barrier",
    "smsp__average_warp_latency_issue_stalled_math_pipe_throttle.ratio": "stall_math_throttle",
    "smsp__average_warp_latency_issue_stalled_mio_throttle.ratio": "stall_mio_throttle",
}
NVTX_RANGE = "ka_profile"
_ERRORS = re.compile(r"ERROR SUMMARY:\s*(\d+) error")
# racecheck ends with its own line: "RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)"
_RACES = re.compile(r"RACECHECK SUMMARY:\s*(\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")


def ncu_prefix(log: Path) -> list[str] | None:
    exe = shutil.which("ncu")
    if exe is None:
        return None
    return [exe, "--clock-control", "none", "--target-processes", "all", "--nvtx", "--nvtx-include",
            f"{NVTX_RANGE}/", "--metrics", ",".join(NCU_METRICS), "--csv", "--page", "raw", "--log-file", str(log)]


# Room the sanitizer leaves after every allocation: allocations otherwise sit back to back, and a read
# just past one tensor lands inside the next, which memcheck sees as valid (the H200 showed an unmasked
# read 32 bytes past the input pass clean without it).
SANITIZER_PADDING = 1 << 20


def sanitizer_prefix(tool: str, log: Path) -> list[str] | None:
    exe = shutil.which("compute-sanitizer")
    if exe is None:
        return None
    padding = ["--padding", str(SANITIZER_PADDING)] if tool == "memcheck" and _sanitizer_has(exe, "--padding") else []
    return [exe, "--tool", tool, *padding, "--target-processes", "all", "--log-file", str(log), "--print-limit", "20"]


@functools.lru_cache(maxsize=8)
def _sanitizer_has(exe: str, option: str) -> bool:
    """Whether this compute-sanitizer lists `option` in its help (options come and go between versions)."""
    try:
        out = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return option in out.stdout + out.stderr


def parse_ncu_csv(text: str) -> list[dict[str, Any]]:
    """One dict per profiled kernel launch, with the metrics renamed and converted to numbers."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if len(lines) < 2:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header, body = rows[0], rows[1:]
    out = []
    for row in body:
        if len(row) != len(header) or not row[0].strip().isdigit():
            continue  # the units row, or a line that is not a kernel record
        rec = dict(zip(header, row, strict=True))
        item: dict[str, Any] = {"kernel": rec.get("Kernel Name", "?")[:120]}
        for metric, name in NCU_METRICS.items():
            val = rec.get(metric)
            if val is None:
                continue
            try:
                item[name] = float(val.replace(",", ""))
            except ValueError:
                item[name] = val
        out.append(item)
    return out


def summarize_profile(kernels: list[dict[str, Any]]) -> list[str]:
    """A few lines for the LLM: per kernel, time, DRAM and SM % of peak, occupancy, top stall."""
    lines = []
    for k in kernels[:8]:
        stalls = {n: k[n] for n in k if n.startswith("stall_") and isinstance(k[n], float)}
        top = max(stalls, key=stalls.get) if stalls else None
        bits = [f"{k['kernel'][:60]}: {k.get('duration_ns', 0) / 1e3:.1f} us",
                f"DRAM {k.get('dram_pct', 0):.0f}% of peak", f"SM {k.get('sm_pct', 0):.0f}%",
                f"occupancy {k.get('achieved_occupancy_pct', 0):.0f}%", f"{int(k.get('registers', 0))} regs/thread"]
        if top:
            bits.append(f"top stall {top.removeprefix('stall_')} ({stalls[top]:.1f} cycles)")
        lines.append(", ".join(bits))
    return lines


def parse_sanitizer(text: str) -> dict[str, Any]:
    """Error count from the tool's summary line (None when there is none: the run did not finish),
    racecheck's hazard warnings, and the first findings."""
    m, r = _ERRORS.search(text), _RACES.search(text)
    errors = int(m.group(1)) if m else int(r.group(2)) if r else None
    marks = ("=========  Invalid", "========= Invalid", "========= Race", "========= Error")
    findings = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(marks)]
    summary = next((ln.strip("= ").strip() for ln in reversed(text.splitlines()) if "SUMMARY:" in ln), "")
    out = {"errors": errors, "findings": findings[:10], "summary": summary}
    if r:
        out["hazard_warnings"] = int(r.group(3))
    return out
