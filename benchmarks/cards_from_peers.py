"""Copy the library's measured figures from a library_peers.json results file into the kernel cards.

Each card.json gets a `measured` list (one row per mode: our median, every peer's median from the same
run, % of the measured copy bandwidth, the source file), and card.md a generated "Measured" section.
Run: `python benchmarks/cards_from_peers.py benchmarks/results/<date>-h200/library_peers.json`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: the package and benchmarks.common from the checkout
    sys.path.insert(0, str(ROOT))

from benchmarks.common import BEGIN, END, write_measured  # noqa: E402

KERNELS = ROOT / "kernelagent" / "kernels"
SHAPES = {"softmax": "x [32768, 8192] bf16", "rms_norm": "x [32768, 8192] bf16, weight [8192]",
          "cross_entropy": "logits [8192, 128256] bf16, int64 targets, mean"}


def rows_for(data: dict[str, Any], op: str, source: str) -> list[dict[str, Any]]:
    out = []
    for mode in ("forward", "forward+backward"):
        got = {r["impl"]: r for r in data["rows"] if r.get("op") == op and r.get("mode") == mode}
        ours = got.get("kernelagent", {})
        if "median_ms" not in ours:
            continue
        row = {"date": data["environment"]["date"], "gpu": data["environment"]["gpu"],
               "torch": data["environment"]["torch"], "triton": data["environment"]["triton"],
               "shape": SHAPES[op], "mode": mode, "median_ms": round(ours["median_ms"], 4),
               "peers_ms": {k: round(v["median_ms"], 4) for k, v in got.items()
                            if k != "kernelagent" and "median_ms" in v},
               "method": data["method"], "source": source}
        if "pct_of_copy_bw" in ours:
            row["pct_of_copy_bw"] = round(ours["pct_of_copy_bw"], 1)
        out.append(row)
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [BEGIN, "## Measured", ""]
    for r in rows:
        peers = " · ".join(f"{k} {v * 1e3:.0f} µs" for k, v in r["peers_ms"].items())
        pct = f", {r['pct_of_copy_bw']} % of the measured copy bandwidth" if "pct_of_copy_bw" in r else ""
        lines.append(f"- {r['mode']}, {r['shape']}: **{r['median_ms'] * 1e3:.0f} µs**{pct}; same run: {peers}")
    r0 = rows[0]
    lines += ["", f"{r0['gpu']}, {r0['date']}, torch {r0['torch']}, triton {r0['triton']}; {r0['method']}. "
              f"Source: `{r0['source']}` (written by `benchmarks/library_peers.py`).", END]
    return "\n".join(lines)


def update(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    source = str(path.resolve().relative_to(ROOT))
    done = []
    for card_json in sorted(KERNELS.glob("*/card.json")):
        op = card_json.parent.name
        rows = rows_for(data, op, source)
        if not rows:
            continue
        write_measured(card_json.parent, rows, markdown(rows))
        done.append(op)
    return done


if __name__ == "__main__":
    print(update(Path(sys.argv[1])))
