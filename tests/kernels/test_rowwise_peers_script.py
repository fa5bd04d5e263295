"""benchmarks/rowwise_peers.py without a GPU: the PNG it draws, the card rows and verdicts it derives from
a results file (synthetic here), and the markdown block the registry test looks for."""

from __future__ import annotations

import struct
import zlib

from benchmarks import rowwise_peers as rp


def _results() -> dict:
    rows = []
    for impl, ms in (("kernelagent-triton", 0.25), ("kernelagent-cute", 0.27), ("eager", 0.9),
                     ("torch.compile", 0.26), ("quack", 0.3)):
        for mode, scale in (("forward", 1.0), ("backward", 1.5), ("forward+backward", 2.5)):
            rows.append({"op": "softmax", "impl": impl, "m": 32768, "n": 8192, "mode": mode,
                         "median_ms": ms * scale, "tb_per_s": 0.537 * {"forward": 2, "backward": 3,
                                                                        "forward+backward": 5}[mode] / (ms * scale)})
        for n in (1024, 262144):
            rows.append({"op": "softmax", "impl": impl, "m": rp.SWEEP_ELEMENTS // n, "n": n, "mode": "forward",
                         "median_ms": ms / 2, "tb_per_s": 4.0 - ms})
    rows.append({"op": "softmax", "impl": "liger", "m": 32768, "n": 8192, "mode": "forward", "error": "boom"})
    env = {"date": "2026-12-01", "gpu": "NVIDIA H200", "torch": "2.11", "triton": "3.6.0", "cutlass_dsl": "4.8.1"}
    return {"benchmark": "rowwise_peers", "environment": env, "method": "events", "rows": rows}


def test_plot_writes_a_valid_png(tmp_path):
    path = rp.plot(_results(), tmp_path / "p.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    idat = data.index(b"IDAT")
    length = struct.unpack(">I", data[idat - 4:idat])[0]
    raw = zlib.decompress(data[idat + 4:idat + 4 + length])
    assert len(raw) == height * (1 + 3 * width)
    assert raw.count(b"\xff") < len(raw)  # something was drawn


def test_card_rows_keep_every_peer_and_say_what_misses():
    rows = rp.card_rows(_results(), "softmax", "benchmarks/results/x/rowwise_peers.json")
    assert [(r["backend"], r["mode"]) for r in rows] == [(b, m) for m in rp.MODES for b in ("triton", "cute")]
    fwd = rows[0]
    assert fwd["median_ms"] == 0.25 and fwd["peers_ms"] == {"eager": 0.9, "torch.compile": 0.26, "quack": 0.3}
    assert "misses" not in fwd  # 4.3 TB/s >= 4.1
    fwd_cute = [r for r in rows if r["backend"] == "cute" and r["mode"] == "forward"][0]
    assert "4.1 TB/s target: 3.98" in fwd_cute["misses"]
    text = rp.card_markdown(rows)
    assert text.startswith(rp.BEGIN) and text.endswith(rp.END) and "250 µs" in text
    assert rp.card_rows(_results(), "layer_norm", "x") == []


def test_verdicts_compare_with_the_best_peer_and_the_targets():
    got = {(v["impl"], v["mode"], v["n"]): v for v in rp.verdicts(_results()["rows"])}
    triton = got[("kernelagent-triton", "forward", 8192)]
    assert triton["faster_than_best_peer"] and triton["meets_target"]
    cute = got[("kernelagent-cute", "forward", 8192)]
    assert not cute["faster_than_best_peer"] and abs(cute["vs_best_peer"] - 0.26 / 0.27) < 1e-9
    assert "meets_target" not in got[("kernelagent-triton", "forward", 1024)]
