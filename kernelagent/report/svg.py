"""Small SVG charts for the HTML report, with no plotting library: axes (linear or log), points with
error bars, lines, a roofline and a histogram. Each function returns one `<svg>` element as text."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

W, H = 640, 320
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 28, 44
COLORS = {"accepted": "#1a7f37", "unverified": "#9a6700", "rejected": "#cf222e",
          "line": "#0969da", "ceiling": "#6e7781", "bar": "#0969da"}


@dataclass
class Scale:
    lo: float
    hi: float
    a: float  # pixel of lo
    b: float  # pixel of hi
    log: bool = False

    def __call__(self, v: float) -> float:
        lo, hi, v = (math.log10(x) for x in (self.lo, self.hi, max(v, 1e-300))) if self.log else \
            (self.lo, self.hi, v)
        return self.a + (v - lo) / ((hi - lo) or 1.0) * (self.b - self.a)

    def ticks(self) -> list[float]:
        if self.log:
            first, last = math.floor(math.log10(self.lo)), math.ceil(math.log10(self.hi))
            steps = (1,) if last - first > 3 else (1, 2, 5)
            return [m * 10.0**e for e in range(first, last + 1) for m in steps if self.lo <= m * 10.0**e <= self.hi]
        step = _nice_step((self.hi - self.lo) / 5)
        start = math.ceil(self.lo / step) * step
        return [round(start + i * step, 10) for i in range(int((self.hi - start) / step) + 1)]


def _nice_step(raw: float) -> float:
    if raw <= 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)


def _span(values: list[float], log: bool, pad: float = 0.08) -> tuple[float, float]:
    vals = [v for v in values if v is not None and (v > 0 or not log)]
    if not vals:
        return (0.1, 10.0) if log else (0.0, 1.0)
    lo, hi = min(vals), max(vals)
    if log:
        return lo / 1.5, hi * 1.5
    if lo == hi:
        return lo - 1, hi + 1
    margin = (hi - lo) * pad
    return lo - margin, hi + margin


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1000 or abs(v) < 0.01:
        return f"{v:.0e}".replace("e+0", "e").replace("e-0", "e-")
    return f"{v:g}"


def frame(title: str, xs: Scale, ys: Scale, xlabel: str, ylabel: str, body: list[str]) -> str:
    """An SVG with a title, both axes with ticks and labels, and `body` drawn inside."""
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
             f'role="img" aria-label="{escape(title)}" font-family="sans-serif" font-size="11">',
             f"<title>{escape(title)}</title>",
             f'<text x="{W / 2}" y="16" text-anchor="middle" font-size="13" font-weight="bold">{escape(title)}</text>',
             f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" stroke="#444"/>',
             f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" stroke="#444"/>']
    for t in xs.ticks():
        x = xs(t)
        parts.append(f'<line x1="{x:.1f}" y1="{H - BOTTOM}" x2="{x:.1f}" y2="{H - BOTTOM + 4}" stroke="#444"/>'
                     f'<text x="{x:.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{_fmt(t)}</text>')
    for t in ys.ticks():
        y = ys(t)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" stroke="#eee"/>'
                     f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    parts.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 8}" text-anchor="middle">{escape(xlabel)}</text>')
    parts.append(f'<text x="14" y="{(TOP + H - BOTTOM) / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {(TOP + H - BOTTOM) / 2})">{escape(ylabel)}</text>')
    return "\n".join(parts + body + ["</svg>"])


def placeholder(title: str, note: str) -> str:
    """A chart-sized box saying why there is no chart (e.g. speed not measured without a GPU)."""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} 80" width="{W}" height="80" role="img" '
            f'aria-label="{escape(title)}" font-family="sans-serif" font-size="12"><title>{escape(title)}</title>'
            f'<rect x="1" y="1" width="{W - 2}" height="78" fill="#f6f8fa" stroke="#d0d7de"/>'
            f'<text x="{W / 2}" y="34" text-anchor="middle" font-weight="bold">{escape(title)}</text>'
            f'<text x="{W / 2}" y="56" text-anchor="middle">{escape(note)}</text></svg>')


def _xscale(lo: float, hi: float, log: bool = False) -> Scale:
    return Scale(lo, hi, LEFT, W - RIGHT, log)


def _yscale(lo: float, hi: float, log: bool = False) -> Scale:
    return Scale(lo, hi, H - BOTTOM, TOP, log)


def speedup_chart(title: str, points: list[dict], ylabel: str = "speedup vs eager (x)") -> str:
    """Points (x, y, lo, hi, verdict, label) with error bars on a log y axis, and a dashed line at 1x."""
    pts = [p for p in points if p.get("y")]
    if not pts:
        return placeholder(title, "speed not measured (no GPU timings)")
    xs = _xscale(*_span([p["x"] for p in pts], False))
    ys = _yscale(*_span([v for p in pts for v in (p["y"], p.get("lo"), p.get("hi"), 1.0) if v], True), True)
    body = [f'<line x1="{LEFT}" y1="{ys(1.0):.1f}" x2="{W - RIGHT}" y2="{ys(1.0):.1f}" stroke="#999" '
            'stroke-dasharray="4 3"/>']
    for p in pts:
        x, color = xs(p["x"]), COLORS.get(p.get("verdict", "accepted"), COLORS["line"])
        if p.get("lo") and p.get("hi"):
            body.append(f'<line class="ci" x1="{x:.1f}" y1="{ys(p["lo"]):.1f}" x2="{x:.1f}" y2="{ys(p["hi"]):.1f}" '
                        f'stroke="{color}"/>')
        body.append(f'<circle cx="{x:.1f}" cy="{ys(p["y"]):.1f}" r="4" fill="{color}">'
                    f'<title>{escape(p.get("label", ""))}</title></circle>')
    return frame(title, xs, ys, "turn", ylabel, body)


def line_chart(title: str, xs_vals: list[float], ys_vals: list[float | None], xlabel: str, ylabel: str) -> str:
    """One line through the points that have a value (e.g. the best speedup after each turn)."""
    pts = [(x, y) for x, y in zip(xs_vals, ys_vals, strict=True) if y is not None]
    if not pts:
        return placeholder(title, "nothing measured yet")
    xs = _xscale(*_span([x for x, _ in pts], False))
    ys = _yscale(*_span([y for _, y in pts] + [0.0], False))
    path = " ".join(f"{'M' if i == 0 else 'L'}{xs(x):.1f},{ys(y):.1f}" for i, (x, y) in enumerate(pts))
    dots = [f'<circle cx="{xs(x):.1f}" cy="{ys(y):.1f}" r="3" fill="{COLORS["line"]}"/>' for x, y in pts]
    return frame(title, xs, ys, xlabel, ylabel,
                 [f'<path class="series" d="{path}" fill="none" stroke="{COLORS["line"]}" stroke-width="2"/>'] + dots)


def roofline_chart(title: str, points: list[dict], bandwidth_gbps: float, peak_tflops: float) -> str:
    """Achieved GFLOP/s against arithmetic intensity (FLOP/byte), under the memory and compute roofs."""
    pts = [p for p in points if p.get("intensity") and p.get("gflops")]
    if not pts:
        return placeholder(title, "no timed kernel with known FLOPs and bytes")
    peak = peak_tflops * 1e3
    ridge = peak / bandwidth_gbps
    xs = _xscale(*_span([p["intensity"] for p in pts] + [ridge], True), True)
    ys = _yscale(*_span([p["gflops"] for p in pts] + [peak], True), True)
    x0, x1 = xs.lo, xs.hi
    roof = [(x0, min(peak, bandwidth_gbps * x0)), (min(max(ridge, x0), x1), min(peak, bandwidth_gbps * ridge)),
            (x1, min(peak, bandwidth_gbps * x1))]
    path = " ".join(f"{'M' if i == 0 else 'L'}{xs(x):.1f},{ys(y):.1f}" for i, (x, y) in enumerate(roof))
    body = [f'<path class="roof" d="{path}" fill="none" stroke="{COLORS["ceiling"]}" stroke-width="2"/>',
            f'<text x="{W - RIGHT - 4}" y="{ys(peak) - 6:.1f}" text-anchor="end" fill="{COLORS["ceiling"]}">'
            f'{peak_tflops:g} TFLOP/s, {bandwidth_gbps:g} GB/s</text>']
    for p in pts:
        body.append(f'<circle class="kernel" cx="{xs(p["intensity"]):.1f}" cy="{ys(p["gflops"]):.1f}" r="5" '
                    f'fill="{COLORS["accepted"]}"><title>{escape(p.get("label", ""))}</title></circle>')
    return frame(title, xs, ys, "arithmetic intensity (FLOP/byte)", "GFLOP/s", body)


def _bar(x: float, y: float, width: float, height: float, tip: str) -> str:
    return (f'<rect class="bin" x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}" '
            f'fill="{COLORS["bar"]}"><title>{escape(tip)}</title></rect>')


def histogram(title: str, values: list[float], xlabel: str = "speedup vs eager (x, log scale)") -> str:
    """Counts of `values` in bins equal on a log2 scale (speedups: 0.5x and 2x sit symmetric around 1x)."""
    vals = [v for v in values if v and v > 0]
    if not vals:
        return placeholder(title, "speed not measured (no GPU timings)")
    lo, hi = math.floor(math.log2(min(vals)) * 2) / 2, math.ceil(math.log2(max(vals)) * 2) / 2
    hi = hi if hi > lo else lo + 0.5
    edges = [lo + 0.5 * i for i in range(int((hi - lo) / 0.5) + 1)]
    counts = [sum(1 for v in vals if a <= math.log2(v) < b or (b == edges[-1] and math.log2(v) == b))
              for a, b in zip(edges, edges[1:], strict=False)]
    xs = _xscale(2 ** edges[0], 2 ** edges[-1], True)
    ys = _yscale(0, max(counts) * 1.15 or 1)
    body = [_bar(xs(2**a) + 1, ys(c), max(1.0, xs(2**b) - xs(2**a) - 2), ys(0) - ys(c), f"{2**a:.3g}x-{2**b:.3g}x: {c}")
            for a, b, c in zip(edges, edges[1:], counts, strict=False)]
    body.append(f'<line x1="{xs(1.0):.1f}" y1="{TOP}" x2="{xs(1.0):.1f}" y2="{H - BOTTOM}" stroke="#999" '
                'stroke-dasharray="4 3"/>' if xs.lo <= 1.0 <= xs.hi else "")
    return frame(title, xs, ys, xlabel, "problems", body)
