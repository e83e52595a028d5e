"""A static picture of a plotly figure as inline SVG: the dashboards' fallback where no widget
front end runs (an HTML export, a notebook viewer, a kernel that has gone away).

Offline and self-contained: no plotly.js, no CDN, no browser. It covers what the dashboards
draw (scatter lines and markers with dashes and symbols, bars grouped, stacked, overlaid or
horizontal with patterns, heatmaps, line and rectangle shapes, paper annotations, log and
category axes, subplots, a legend and colour bars); it is an honest picture, not a pixel copy
of plotly's. Coordinates are rounded to 0.1 px and points closer than a pixel dropped, so a
long line costs bytes for what can be seen, not for what was computed. Each picture carries a
``<title>`` and a ``<desc>`` (series, axes) for screen readers.

>>> svg = figure_svg({"data": [{"type": "scatter", "x": [1, 2], "y": [3, 4]}]})
>>> svg.startswith("<svg")
True
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import math
import re
from html import escape

import numpy as np

__all__ = ["figure_svg"]

GRID, AXIS, INK = "#E5E5E5", "#444444", "#222222"
DASH = {
    "dot": "2,3",
    "dash": "6,4",
    "longdash": "11,4",
    "dashdot": "6,3,2,3",
    "longdashdot": "11,3,2,3",
}
PATTERN = {  # plotly pattern shape -> SVG path in an 8 x 8 tile
    "/": "M0,8L8,0M-2,2L2,-2M6,10L10,6",
    "\\": "M0,0L8,8M-2,6L2,10M6,-2L10,2",
    "x": "M0,8L8,0M0,0L8,8",
    "-": "M0,4H8",
    "|": "M4,0V8",
    "+": "M0,4H8M4,0V8",
    ".": "M3,3h2v2h-2z",
}
_TYPED = {"i1": "i1", "u1": "u1", "i2": "<i2", "u2": "<u2", "i4": "<i4", "u4": "<u4",
          "f4": "<f4", "f8": "<f8"}  # fmt: skip
_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


# Data ----------------------------------------------------------------------------------------
def _arr(v) -> list:
    """A trace array as a list: plain lists, numpy arrays, or plotly's base64 typed arrays."""
    if v is None:
        return []
    if isinstance(v, dict) and "bdata" in v:
        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=_TYPED[v["dtype"]])
        if v.get("shape"):
            a = a.reshape([int(s) for s in str(v["shape"]).split(",")])
        return a.tolist()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (list, tuple)):
        return [x.tolist() if isinstance(x, np.ndarray) else x for x in v]
    return [v]


def _num(v) -> float | None:
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _per_point(v, n: int, default=None) -> list:
    """A scalar-or-array style property, as one value per point."""
    if v is None:
        return [default] * n
    vals = _arr(v) if isinstance(v, (list, tuple, np.ndarray, dict)) else None
    if vals is None or (isinstance(v, dict) and "bdata" not in v):
        return [v] * n
    return (vals + [default] * n)[:n] if vals else [default] * n


def _text(s) -> str:
    """Plain text of a plotly label (which may hold <b>, <br> and entities)."""
    s = re.sub(r"<br\s*/?>", " ", str(s or ""))
    s = re.sub(r"<[^>]+>", "", s)
    return escape(s.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"), quote=True)


def _f(v: float) -> str:
    """A pixel coordinate, rounded to 0.1 px."""
    s = f"{v:.1f}"
    return s[:-2] if s.endswith(".0") else s


def _box(x: float, y: float, w: float, h: float) -> str:
    """A rectangle as path commands (shorter than a <rect> element)."""
    return f"M{_f(x)},{_f(y)}h{_f(w)}v{_f(h)}h{_f(-w)}z"


def _tick_label(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    for scale, p in _SI:
        if a >= scale:
            return f"{v / scale:.3g}{p}"
    return f"{v:.3g}"  # below 0.01 this is e-notation: 1e-05


def _frac(v, lo: float, hi: float):
    """Where v lies from lo (0) to hi (1); halves keep huge finite values from overflowing."""
    return (v * 0.5 - lo * 0.5) / ((hi * 0.5 - lo * 0.5) or 1.0)


# Colours -------------------------------------------------------------------------------------
def _scale(name_or_list) -> list[tuple[float, str]]:
    """A colour scale as (position, colour) stops; plotly's named scales, cividis by default."""
    try:
        import plotly.colors as pc

        return [(float(p), c) for p, c in pc.get_colorscale(name_or_list or "cividis")]
    except Exception:
        import plotly.colors as pc

        return [(float(p), c) for p, c in pc.get_colorscale("cividis")]


def _rgb(c: str) -> tuple[int, int, int]:
    if c.startswith("#"):
        return tuple(int(c[i : i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]
    nums = re.findall(r"[\d.]+", c)
    return tuple(int(float(x)) for x in nums[:3])  # type: ignore[return-value]


def _lookup(stops, t: float) -> str:
    t = min(1.0, max(0.0, t))
    for (p0, c0), (p1, c1) in itertools.pairwise(stops):
        if t <= p1:
            w = 0 if p1 == p0 else (t - p0) / (p1 - p0)
            a, b = _rgb(c0), _rgb(c1)
            return "#{:02X}{:02X}{:02X}".format(
                *tuple(round(x + (y - x) * w) for x, y in zip(a, b, strict=False))
            )
    return "#{:02X}{:02X}{:02X}".format(*_rgb(stops[-1][1]))


def _paint(c) -> tuple[str, str]:
    """SVG fill (or stroke) and an opacity attribute for a colour (rgba alpha split out)."""
    if not isinstance(c, str):
        return "#444444", ""
    m = re.match(r"rgba\(([^)]*)\)", c.replace(" ", ""))
    if m:
        r, g, b, a = (float(x) for x in m.group(1).split(","))
        if a == 0:
            return "none", ""
        return f"#{int(r):02X}{int(g):02X}{int(b):02X}", f' fill-opacity="{a:g}"'
    return escape(c, quote=True), ""


# Axes ----------------------------------------------------------------------------------------
class _Axis:
    def __init__(self, name: str, spec: dict, px: tuple[float, float]) -> None:
        self.name, self.spec = name, spec
        self.type = spec.get("type") or ""
        self.visible = spec.get("visible", True) is not False
        self.px = px  # pixel of the range's first and last value
        self.cats: list = list(_arr(spec.get("categoryarray"))) if spec.get("categoryarray") else []
        self.lo = self.hi = 0.0
        self.title = spec.get("title")
        if isinstance(self.title, dict):
            self.title = self.title.get("text")

    def cat(self, v) -> float:
        if v not in self.cats:
            self.cats.append(v)
        return float(self.cats.index(v))

    def lin(self, v) -> float | None:
        """Data value -> linear axis units (category index, log10 on log axes)."""
        if self.type == "category":
            return None if v is None else self.cat(v)
        f = _num(v)
        if f is None:
            return None
        if self.type == "log":
            return math.log10(f) if f > 0 else None
        return f

    def px_of(self, u: float | None) -> float | None:
        if u is None or self.hi == self.lo:
            return None if u is None else (self.px[0] + self.px[1]) / 2
        # halves keep every finite value finite (the span of two huge values overflows)
        half = self.hi * 0.5 - self.lo * 0.5
        if half == 0:  # a range narrower than the smallest float: its middle
            return (self.px[0] + self.px[1]) / 2
        p = self.px[0] + (u * 0.5 - self.lo * 0.5) / half * (self.px[1] - self.px[0])
        return p if math.isfinite(p) and abs(p) < 1e7 else None

    def set_range(self, units: list[float], pad: bool) -> None:
        rng = self.spec.get("range")
        if rng and _num(rng[0]) is not None and _num(rng[1]) is not None:
            self.lo, self.hi = float(rng[0]), float(rng[1])
            return  # plotly gives log ranges in log10 units already
        if self.type == "category":
            lo, hi = -0.5, max(len(self.cats), 1) - 0.5
        elif units:
            lo, hi = min(units), max(units)
            half = hi * 0.5 - lo * 0.5 or (abs(hi) * 0.5 or 0.5)
            if pad or lo == hi:
                top = 1.7e308
                lo, hi = max(lo - 0.1 * half, -top), min(hi + 0.1 * half, top)
        else:
            lo, hi = (0.0, 1.0) if self.type != "log" else (0.0, 2.0)
        if self.spec.get("autorange") == "reversed":
            lo, hi = hi, lo
        self.lo, self.hi = lo, hi

    def ticks(self) -> list[tuple[float, str]]:
        lo, hi = sorted((self.lo, self.hi))
        length = abs(self.px[1] - self.px[0])
        if self.type == "category":
            step = max(1, math.ceil(len(self.cats) * 16 / max(length, 1)))
            return [(float(i), str(c)) for i, c in enumerate(self.cats) if i % step == 0]
        if self.type == "log":
            lo, hi = max(lo, -320.0), min(hi, 308.0)  # the exponents a float can hold
            if hi - lo < 1:
                return [(math.log10(v), _tick_label(v)) for v in _nice(10**lo, 10**hi, 4) if v > 0]  # fmt: skip
            k = max(1, math.ceil((hi - lo) / max(length / 45, 1)))
            return [(float(e), _tick_label(10.0**e)) for e in range(math.ceil(lo), math.floor(hi) + 1) if e % k == 0]  # fmt: skip
        return [(v, _tick_label(v)) for v in _nice(lo, hi, max(2, int(length / 70)))]


def _nice(lo: float, hi: float, n: int) -> list[float]:
    """About ``n`` round tick values (steps of 1, 2, 2.5 or 5 x 10^k) from lo to hi."""
    raw = hi / n - lo / n  # no overflow for any finite lo, hi
    if not raw > 0 or not math.isfinite(raw):
        return [lo] if math.isfinite(lo) else []
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), raw)  # subnormal: raw
    if not math.isfinite(step) or step <= 0:
        return [lo]
    k0 = math.ceil(lo / step)
    count = int(hi / step - k0 + 1e-9) + 1
    ticks = [(k0 + i) * step for i in range(max(0, min(count, 3 * n + 2)))]
    return [round(v, 12) if abs(v) < 1e15 else v for v in ticks if math.isfinite(v)]


def _axis_key(ref: str, letter: str) -> str:
    return f"{letter}axis{ref[1:]}"


# Markers -------------------------------------------------------------------------------------
def _marker_path(symbol: str, size: float) -> tuple[str, bool]:
    """SVG path (centred on 0,0) of a plotly marker symbol, and whether it is open."""
    s = str(symbol or "circle")
    is_open = s.endswith("-open") or s.endswith("-open-dot") or s.startswith("line-")
    base = s.replace("-open-dot", "").replace("-open", "").replace("-dot", "")
    r = size / 2
    q = _f(r)
    shapes = {
        "square": f"M-{q},-{q}H{q}V{q}H-{q}Z",
        "diamond": f"M0,-{_f(r * 1.3)}L{_f(r * 1.3)},0L0,{_f(r * 1.3)}L-{_f(r * 1.3)},0Z",
        "triangle-up": f"M0,-{q}L{q},{q}H-{q}Z",
        "triangle-down": f"M0,{q}L{q},-{q}H-{q}Z",
        "triangle-right": f"M{q},0L-{q},{q}V-{q}Z",
        "triangle-left": f"M-{q},0L{q},{q}V-{q}Z",
        "cross": f"M-{q},-{_f(r / 3)}H{q}V{_f(r / 3)}H-{q}ZM-{_f(r / 3)},-{q}H{_f(r / 3)}V{q}H-{_f(r / 3)}Z",
        "x": f"M-{q},-{q}L{q},{q}M{q},-{q}L-{q},{q}",
        "line-ns": f"M0,-{q}V{q}",
        "line-ew": f"M-{q},0H{q}",
        "hexagon": "M" + "L".join(f"{_f(r * math.cos(a))},{_f(r * math.sin(a))}" for a in np.arange(6) * math.pi / 3 + math.pi / 6) + "Z",
        "star": "M" + "L".join(f"{_f((r if i % 2 == 0 else r * 0.45) * math.sin(i * math.pi / 5))},{_f(-(r if i % 2 == 0 else r * 0.45) * math.cos(i * math.pi / 5))}" for i in range(10)) + "Z",
    }  # fmt: skip
    if base == "x":
        is_open = True  # drawn as a stroke
    return shapes.get(base, f"M{q},0A{q},{q} 0 1,1 0,-{q}A{q},{q} 0 0,1 {q},0Z"), is_open


# The renderer --------------------------------------------------------------------------------
class _Svg:
    def __init__(self, fig: dict) -> None:
        self.data = [t for t in fig.get("data", ()) if isinstance(t, dict)]
        self.layout = dict(fig.get("layout") or {})
        lay = self.layout
        self.w = float(lay.get("width") or 700)
        self.h = float(lay.get("height") or 450)
        m = {"l": 80, "r": 80, "t": 100, "b": 80, **(lay.get("margin") or {})}
        # Like plotly's automargin: room on the left for long category labels of a y axis.
        labels = [
            str(v) for t in self.data if t.get("orientation") == "h" for v in _arr(t.get("y"))
        ]
        left = max([m["l"], *(min(6.5 * len(s), 200) + 14 for s in labels)])
        self.area = (left, m["t"], self.w - m["r"], self.h - m["b"])
        self.defs: dict[str, str] = {}
        self.out: list[str] = []
        self.legend: list[tuple[str, str]] = []  # (swatch svg at 0,0, label)
        self.axes: dict[str, _Axis] = {}
        self.clips: dict[tuple[str, str], str] = {}

    # Helpers ------------------------------------------------------------------------------
    def ref(self, kind: str, key: str, body: str) -> str:
        """Id of a shared definition (marker, pattern, gradient), added once."""
        ident = f"\0{kind}{len(self.defs)}"
        for k, v in self.defs.items():
            if v == body:
                return k
        self.defs[ident] = body
        return ident

    def axis(self, ref: str, letter: str) -> _Axis:
        key = _axis_key(ref or letter, letter)
        if key not in self.axes:
            spec = dict(self.layout.get(key) or {})
            d0, d1 = spec.get("domain") or [0, 1]
            x0, y0, x1, y1 = self.area
            px = (x0 + d0 * (x1 - x0), x0 + d1 * (x1 - x0)) if letter == "x" else (
                y1 - d0 * (y1 - y0), y1 - d1 * (y1 - y0))  # fmt: skip
            self.axes[key] = _Axis(key, spec, px)
        return self.axes[key]

    def axes_of(self, t: dict) -> tuple[_Axis, _Axis]:
        return self.axis(t.get("xaxis", "x"), "x"), self.axis(t.get("yaxis", "y"), "y")

    def visible(self, t: dict) -> bool:
        return t.get("visible", True) is True

    # Ranges -------------------------------------------------------------------------------
    def ranges(self) -> None:
        units: dict[str, list[float]] = {}
        pad: dict[str, bool] = {}
        for t in self.data:
            ax, ay = self.axes_of(t)
            for a, key in ((ax, "x"), (ay, "y")):
                if not a.type:
                    vals = _arr(t.get(key))
                    if t.get("type") == "heatmap" and not vals:
                        a.type = "linear"
                    elif any(isinstance(v, str) for v in vals):
                        a.type = "category"
                    else:
                        a.type = "linear"
            if not self.visible(t):
                continue
            for a, vals in self.extent(t, ax, ay):
                units.setdefault(a.name, []).extend(v for v in vals if _num(v) is not None)
            if t.get("type", "scatter") == "scatter" and "markers" in str(t.get("mode", "markers")):
                pad[ax.name] = pad[ay.name] = True
        for a in self.axes.values():
            a.set_range(units.get(a.name, []), pad.get(a.name, False))
        for a in list(self.axes.values()):  # scaleanchor: equal units per pixel
            other = a.spec.get("scaleanchor")
            if a.name.startswith("y") and other:
                b = self.axis(other, "x")
                sx = abs(b.px[1] - b.px[0]) / (abs(b.hi - b.lo) or 1)
                sy = abs(a.px[1] - a.px[0]) / (abs(a.hi - a.lo) or 1)
                s, c = min(sx, sy), (a if sy > sx else b)
                mid, half = (c.lo + c.hi) / 2, abs(c.px[1] - c.px[0]) / s / 2
                sign = 1 if c.hi >= c.lo else -1
                c.lo, c.hi = mid - sign * half, mid + sign * half

    def extent(self, t: dict, ax: _Axis, ay: _Axis):
        kind = t.get("type", "scatter")
        if kind == "bar":
            pos_ax, val_ax = (ay, ax) if t.get("orientation") == "h" else (ax, ay)
            pos = _arr(t.get("y" if t.get("orientation") == "h" else "x"))
            vals = [r[1] for r in self.bars(t, ax, ay)]
            return [(pos_ax, [pos_ax.lin(p) for p in pos] + self.bar_pos_extent(t, pos_ax)),
                    (val_ax, [u for v in vals for u in v] + [0.0 if val_ax.type != "log" else None]
                     + ([v[1] + 0.1 * (v[1] - v[0]) for v in vals] if _arr(t.get("text")) else []))]  # fmt: skip
        if kind == "heatmap":
            z = _arr(t.get("z"))
            nr, nc = len(z), len(z[0]) if z else 0
            return [(ax, list(self.edges(t.get("x"), ax, nc))), (ay, list(self.edges(t.get("y"), ay, nr)))]  # fmt: skip
        return [(ax, [ax.lin(v) for v in _arr(t.get("x"))]),
                (ay, [ay.lin(v) for v in _arr(t.get("y"))])]  # fmt: skip

    def bar_pos_extent(self, t: dict, a: _Axis) -> list[float]:
        out = []
        for p, _, w in self.bar_slots(t, a):
            out += [p - w / 2, p + w / 2]
        return out

    def edges(self, centres, a: _Axis, n: int) -> list[float]:
        c = [a.lin(v) for v in _arr(centres)][:n] if centres is not None else []
        if len(c) != n or any(v is None for v in c):
            c = [float(i) for i in range(n)]
        if n == 0:
            return []
        if n == 1:
            return [c[0] - 0.5, c[0] + 0.5]
        mids = [(x + y) / 2 for x, y in itertools.pairwise(c)]
        return [2 * c[0] - mids[0], *mids, 2 * c[-1] - mids[-1]]

    # Bars ---------------------------------------------------------------------------------
    def bar_group(self, t: dict) -> list[dict]:
        o = t.get("orientation", "v")
        return [u for u in self.data if u.get("type") == "bar" and self.visible(u)
                and u.get("orientation", "v") == o and u.get("xaxis", "x") == t.get("xaxis", "x")
                and u.get("yaxis", "y") == t.get("yaxis", "y")]  # fmt: skip

    def bar_slots(self, t: dict, pos_ax: _Axis) -> list[tuple[float, float, float]]:
        """(position, offset, width) in axis units for each bar of ``t``."""
        horiz = t.get("orientation") == "h"
        pos = [pos_ax.lin(p) for p in _arr(t.get("y" if horiz else "x"))]
        group = self.bar_group(t)
        mode = self.layout.get("barmode", "group")
        gap = float(
            self.layout.get("bargap", 0.2) if self.layout.get("bargap") is not None else 0.2
        )
        if pos_ax.type == "category":
            full = 1.0
        else:
            allpos = sorted({p for u in group for p in (pos_ax.lin(v) for v in _arr(u.get("y" if horiz else "x"))) if p is not None})  # fmt: skip
            full = min((b - a for a, b in itertools.pairwise(allpos)), default=1.0) or 1.0
        n, k = (len(group), group.index(t)) if mode == "group" and t in group else (1, 0)
        widths = _per_point(t.get("width"), len(pos))
        out = []
        for p, w in zip(pos, widths, strict=False):
            if p is None:
                out.append((math.nan, 0.0, 0.0))
            elif _num(w) is not None:
                out.append((p, 0.0, float(w)))
            else:
                slot = full * (1 - gap) / n
                out.append((p, (k - (n - 1) / 2) * slot, slot))
        return [(p + off, off, w) for p, off, w in out]

    def bars(self, t: dict, ax: _Axis, ay: _Axis) -> list[tuple[int, tuple[float, float]]]:
        """(point index, (start, end) on the value axis) of every drawable bar of ``t``."""
        horiz = t.get("orientation") == "h"
        val_ax = ax if horiz else ay
        vals = _arr(t.get("x" if horiz else "y"))
        base = _per_point(t.get("base"), len(vals), 0)
        stack_below: dict = {}
        if self.layout.get("barmode") in ("stack", "relative"):
            for u in self.bar_group(t):
                if u is t:
                    break
                uv = _arr(u.get("x" if horiz else "y"))
                for p, v in zip(_arr(u.get("y" if horiz else "x")), uv, strict=False):
                    f = _num(v) or 0.0
                    key = (p, f >= 0)
                    stack_below[key] = stack_below.get(key, 0.0) + f
        pos = _arr(t.get("y" if horiz else "x"))
        out = []
        for i, v in enumerate(vals[: len(pos)]):  # a bar needs a position and a value
            f, b = _num(v), _num(base[i]) or 0.0
            if f is None:
                continue
            if stack_below:
                b += stack_below.get((pos[i] if i < len(pos) else None, f >= 0), 0.0)
            lo, hi = val_ax.lin(b), val_ax.lin(b + f)
            if val_ax.type == "log" and lo is None:
                lo = val_ax.lo
            if lo is not None and hi is not None:
                out.append((i, (lo, hi)))
        return out

    def pattern(self, shape: str, colour: str) -> str:
        fill, _ = _paint(colour)
        body = (f'<pattern id="{{id}}" width="8" height="8" patternUnits="userSpaceOnUse">'
                f'<rect width="8" height="8" fill="{fill}" fill-opacity="0.35"/>'
                f'<path d="{PATTERN[shape]}" stroke="{fill}" stroke-width="1.6"/></pattern>')  # fmt: skip
        return self.ref("p", "", body)

    def draw_bar(self, t: dict, ax: _Axis, ay: _Axis) -> str:
        horiz = t.get("orientation") == "h"
        pos_ax, val_ax = (ay, ax) if horiz else (ax, ay)
        slots = self.bar_slots(t, pos_ax)
        mk = t.get("marker") or {}
        n = len(slots)
        colours = _per_point(mk.get("color"), n, "#636EFA")
        opac = _per_point(mk.get("opacity"), n, 1.0)
        line = mk.get("line") or {}
        lcol, lw = _per_point(line.get("color"), n, "#444444"), _per_point(line.get("width"), n, 0)
        shape = (mk.get("pattern") or {}).get("shape") or ""
        shape = shape if isinstance(shape, str) and shape in PATTERN else ""
        rects: dict[tuple, list[list[float]]] = {}
        for i, (v0, v1) in self.bars(t, ax, ay):
            p, _, w = slots[i]
            if not math.isfinite(p):
                continue
            a0, a1 = pos_ax.px_of(p - w / 2), pos_ax.px_of(p + w / 2)
            b0, b1 = val_ax.px_of(v0), val_ax.px_of(v1)
            if None in (a0, a1, b0, b1):
                continue
            a0, a1, b0, b1 = min(a0, a1), max(a0, a1), min(b0, b1), max(b0, b1)
            c = colours[i] if isinstance(colours[i], str) else "#636EFA"
            fill, fop = _paint(c)
            if shape and fill != "none":
                fill = f"url(#{self.pattern(shape, c)})"
            stroke = ""
            if (_num(lw[i]) or 0) > 0:
                stroke = f' stroke="{_paint(lcol[i])[0]}" stroke-width="{_num(lw[i]):g}"'
            elif fill != "none":
                stroke = f' stroke="{_paint(c)[0]}" stroke-width="0.5"'
            op = _num(opac[i])
            style = f'fill="{fill}"{fop}{stroke}' + (
                f' opacity="{op:g}"' if op is not None and op < 1 else ""
            )
            rects.setdefault((round(a0, 1), round(a1, 1), style), []).append([b0, b1])
        by_style: dict[str, list[str]] = {}
        for (a0, a1, style), row in rects.items():
            merged: list[list[float]] = []
            for b0, b1 in sorted(row):  # bars less than a pixel apart: one rectangle
                if merged and b0 <= merged[-1][1] + 1.0:
                    merged[-1][1] = max(merged[-1][1], b1)
                else:
                    merged.append([b0, b1])
            for b0, b1 in merged:
                x, y, w, h = (b0, a0, b1 - b0, a1 - a0) if horiz else (a0, b0, a1 - a0, b1 - b0)
                by_style.setdefault(style, []).append(_box(x, y, max(w, 0.3), max(h, 0.3)))
        parts = [f'<path d="{"".join(r)}" {style}/>' for style, r in by_style.items()]
        texts = _arr(t.get("text"))
        if texts and 0 < n <= 40 and t.get("textposition") != "none":
            for i, (_v0, v1) in self.bars(t, ax, ay):
                if i < len(texts) and texts[i] not in (None, "") and math.isfinite(slots[i][0]):
                    a, b = pos_ax.px_of(slots[i][0]), val_ax.px_of(v1)
                    if a is not None and b is not None:
                        x, y, anchor = (b + 3, a + 4, "start") if horiz else (a, b - 4, "middle")
                        parts.append(f'<text x="{_f(x)}" y="{_f(y)}" text-anchor="{anchor}" font-size="10">{_text(texts[i])}</text>')  # fmt: skip
        swatch_fill = _paint(colours[0] if n and isinstance(colours[0], str) else mk.get("color") if isinstance(mk.get("color"), str) else "#636EFA")[0]  # fmt: skip
        if shape and swatch_fill != "none":
            swatch_fill = f"url(#{self.pattern(shape, swatch_fill)})"
        sw_line = (
            line.get("color")
            if swatch_fill == "none" and isinstance(line.get("color"), str)
            else swatch_fill
        )
        self.add_legend(t, f'<rect x="2" y="-6" width="22" height="12" fill="{swatch_fill}" stroke="{sw_line if sw_line.startswith("#") else "#444444"}" stroke-width="{1.5 if swatch_fill == "none" else 0.5}"/>')  # fmt: skip
        return "".join(parts)

    # Scatter ------------------------------------------------------------------------------
    def draw_scatter(self, t: dict, ax: _Axis, ay: _Axis) -> str:
        xs, ys = _arr(t.get("x")), _arr(t.get("y"))
        n = min(len(xs), len(ys))
        pts = [(ax.px_of(ax.lin(xs[i])), ay.px_of(ay.lin(ys[i]))) for i in range(n)]
        mode = str(t.get("mode") or ("lines+markers" if n < 20 else "lines"))
        line = t.get("line") or {}
        mk = t.get("marker") or {}
        parts, sw = [], []
        lcol = line.get("color") or mk.get("color")
        lcol = _paint(lcol if isinstance(lcol, str) else "#636EFA")[0]
        dash = DASH.get(str(line.get("dash") or "solid"), str(line.get("dash") or "").replace("px", "") if line.get("dash") not in (None, "solid") else "")  # fmt: skip
        lw = _num(line.get("width")) or 2.0
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        if "lines" in mode:
            d, last = [], None
            for i, (x, y) in enumerate(pts):
                if x is None or y is None:
                    last = None
                    continue
                end = i + 1 >= n or pts[i + 1][0] is None or pts[i + 1][1] is None
                if last is None:
                    d.append(f"M{_f(x)},{_f(y)}")
                    last = (x, y)
                elif end or abs(x - last[0]) + abs(y - last[1]) >= 1.0:
                    d.append(f"L{_f(x)},{_f(y)}")
                    last = (x, y)
            if d:
                parts.append(f'<path d="{"".join(d)}" fill="none" stroke="{lcol}" stroke-width="{lw:g}"{dash_attr} stroke-linejoin="round"/>')  # fmt: skip
            sw.append(f'<path d="M0,0H26" stroke="{lcol}" stroke-width="{min(lw, 4):g}"{dash_attr}/>')  # fmt: skip
        if "markers" in mode:
            size = _per_point(mk.get("size"), n, 6)
            syms = _per_point(mk.get("symbol"), n, "circle")
            cols = _per_point(mk.get("color"), n, lcol)
            nums = [_num(c) for c in cols]
            if any(v is not None for v in nums):  # colour-mapped markers
                stops = _scale(mk.get("colorscale"))
                lo = _num(mk.get("cmin")) if mk.get("cmin") is not None else min(v for v in nums if v is not None)  # fmt: skip
                hi = _num(mk.get("cmax")) if mk.get("cmax") is not None else max(v for v in nums if v is not None)  # fmt: skip
                cols = [_lookup(stops, _frac(v, lo, hi)) if v is not None else "#999999" for v in nums]  # fmt: skip
            mline = mk.get("line") or {}
            mlw = _num(mline.get("width"))
            mlc = mline.get("color") if isinstance(mline.get("color"), str) else None
            keep = range(n)
            most = int(_num(mk.get("maxdisplayed")) or 0)
            if 0 < most < n:  # plotly's maxdisplayed: evenly spaced markers along the line
                keep = sorted({round(i * (n - 1) / (most - 1)) for i in range(most)} if most > 1 else {0})  # fmt: skip
            seen, uses, ticks = set(), [], {}
            for i in keep:
                x, y = pts[i]
                if x is None or y is None:
                    continue
                key = (round(x), round(y), syms[i], cols[i])
                if key in seen:
                    continue  # a marker within a pixel of the same marker adds nothing
                seen.add(key)
                sz = _num(size[i]) or 6
                if str(syms[i]).startswith(("line-ns", "line-ew")):  # rug ticks: one path
                    d = f"v{_f(sz)}" if str(syms[i]).startswith("line-ns") else f"h{_f(sz)}"
                    start = (x, y - sz / 2) if d[0] == "v" else (x - sz / 2, y)
                    ticks.setdefault(cols[i], []).append(f"M{_f(start[0])},{_f(start[1])}{d}")
                    continue
                uses.append(self.marker_use(x, y, syms[i], sz, cols[i], mlc, mlw))
            for c, d in ticks.items():
                stroke = _paint(c if isinstance(c, str) else "#444444")[0]
                uses.append(f'<path d="{"".join(d)}" stroke="{stroke}" stroke-width="{mlw or 1.5:g}"/>')  # fmt: skip
            parts.append("".join(uses))
            s0 = (
                syms[0]
                if n
                else mk.get("symbol")
                if isinstance(mk.get("symbol"), str)
                else "circle"
            )
            c0 = cols[0] if n and isinstance(cols[0], str) else lcol
            sw.append(self.marker_use(13, 0, s0, min(_num(size[0]) if n else 8, 12) or 8, c0, mlc, mlw))  # fmt: skip
        if "text" in mode and n <= 150:
            texts = _arr(t.get("text"))
            tpos = str(t.get("textposition") or "middle center")
            fs = _num((t.get("textfont") or {}).get("size")) or 11
            dy = {"top": -(_num(size[0] if "markers" in mode and n else 6) or 6) / 2 - 4, "bottom": fs + 4}.get(tpos.split()[0], fs / 3)  # fmt: skip
            anchor = {"left": "end", "right": "start"}.get(tpos.split()[-1], "middle")
            dx = {"end": -6, "start": 6}.get(anchor, 0)
            for (x, y), s in zip(pts, texts, strict=False):
                if x is not None and y is not None and s not in (None, ""):
                    parts.append(f'<text x="{_f(x + dx)}" y="{_f(y + dy)}" text-anchor="{anchor}" font-size="{fs:g}">{_text(s)}</text>')  # fmt: skip
        self.add_legend(t, "".join(sw) or '<text x="2" y="4" font-size="11">Aa</text>')
        return "".join(parts)

    def marker_use(self, x, y, symbol, size, colour, line_colour, line_width) -> str:
        path, is_open = _marker_path(symbol, size)
        ident = self.ref("m", "", f'<path id="{{id}}" d="{path}"/>')
        c = _paint(colour if isinstance(colour, str) else "#444444")[0]
        if is_open:
            style = f'fill="none" stroke="{c}" stroke-width="{line_width or 1.5:g}"'
        else:
            edge = _paint(line_colour)[0] if line_colour else None
            style = f'fill="{c}"' + (f' stroke="{edge}" stroke-width="{line_width or 1:g}"' if edge else "")  # fmt: skip
        return f'<use href="#{ident}" x="{_f(x)}" y="{_f(y)}" {style}/>'

    # Heatmap ------------------------------------------------------------------------------
    def colour_axis(self, t: dict) -> tuple[list, float | None, float | None, str]:
        if t.get("coloraxis"):
            ca = self.layout.get(t["coloraxis"]) or {}
            bar = ca.get("colorbar") or {}
            title = bar.get("title")
            return _scale(ca.get("colorscale")), _num(ca.get("cmin")), _num(ca.get("cmax")), (title.get("text") if isinstance(title, dict) else title) or ""  # fmt: skip
        title = (t.get("colorbar") or {}).get("title")
        return _scale(t.get("colorscale")), _num(t.get("zmin")), _num(t.get("zmax")), (title.get("text") if isinstance(title, dict) else title) or ""  # fmt: skip

    def draw_heatmap(self, t: dict, ax: _Axis, ay: _Axis) -> str:
        z = np.array([[(_num(v) if _num(v) is not None else np.nan) for v in row] for row in _arr(t.get("z"))], float)  # fmt: skip
        if z.ndim != 2 or z.size == 0:
            return ""
        xe, ye = self.edges(t.get("x"), ax, z.shape[1]), self.edges(t.get("y"), ay, z.shape[0])
        stops, lo, hi, title = self.colour_axis(t)
        finite = z[np.isfinite(z)]
        lo = lo if lo is not None else float(finite.min()) if finite.size else 0.0
        hi = hi if hi is not None else float(finite.max()) if finite.size else 1.0
        # Coarsen a big grid to at most 60 x 60 cells (block means) so the picture stays small.
        fr, fc = math.ceil(z.shape[0] / 60), math.ceil(z.shape[1] / 60)
        if fr > 1 or fc > 1:
            r, c = z.shape[0] // fr * fr, z.shape[1] // fc * fc
            z = np.nanmean(z[:r, :c].reshape(r // fr, fr, c // fc, fc), axis=(1, 3))
            xe, ye = xe[: c + 1 : fc], ye[: r + 1 : fr]
        xp = [ax.px_of(u) for u in xe]
        yp = [ay.px_of(u) for u in ye]
        # 64 colour levels: adjacent cells of one level become one rectangle
        palette = [_lookup(stops, q / 63) for q in range(64)]
        with np.errstate(invalid="ignore"):
            level = np.clip(np.rint(_frac(z, lo, hi) * 63), 0, 63)
        level = np.where(np.isfinite(level), level, -1).astype(int)
        parts, cells = ['<g shape-rendering="crispEdges">'], {}
        for i in range(z.shape[0]):
            j = 0
            while j < z.shape[1]:
                c = palette[level[i, j]] if level[i, j] >= 0 else None
                k = j + 1
                while k < z.shape[1] and level[i, k] == level[i, j]:
                    k += 1
                x0, x1, y0, y1 = xp[j], xp[k], yp[i], yp[i + 1]
                if c and None not in (x0, x1, y0, y1):
                    cells.setdefault(c, []).append(_box(min(x0, x1), min(y0, y1), abs(x1 - x0) + 0.3, abs(y1 - y0) + 0.3))  # fmt: skip
                j = k
        parts += [f'<path d="{"".join(d)}" fill="{c}"/>' for c, d in cells.items()]
        parts.append("</g>")
        text = _arr(t.get("text"))
        if t.get("texttemplate") and text and z.size <= 400 and fr == fc == 1:
            for i, row in enumerate(text):
                for j, s in enumerate(row if isinstance(row, list) else []):
                    x, y = ax.px_of((xe[j] + xe[j + 1]) / 2), ay.px_of((ye[i] + ye[i + 1]) / 2)
                    dark = _frac(z[i, j], lo, hi) < 0.5
                    parts.append(f'<text x="{_f(x)}" y="{_f(y + 4)}" text-anchor="middle" font-size="11" fill="{"#FFFFFF" if dark else INK}">{_text(s)}</text>')  # fmt: skip
        self.colourbars.setdefault((tuple(stops), lo, hi), title)
        return "".join(parts)

    # Shapes and annotations ---------------------------------------------------------------
    def place(self, ref: str, v, letter: str, anchor_ref: str | None = None) -> float | None:
        ref = ref or "paper"
        if ref == "paper":
            x0, y0, x1, y1 = self.area
            f = _num(v)
            if f is None:
                return None
            return x0 + f * (x1 - x0) if letter == "x" else y1 - f * (y1 - y0)
        a = self.axis(ref.replace(" domain", ""), letter)
        return a.px_of(a.lin(v))

    def draw_shapes(self, layer: str) -> str:
        parts = []
        for s in self.layout.get("shapes") or ():
            if (s.get("layer") or "above") != layer:
                continue
            xr, yr = s.get("xref", "x"), s.get("yref", "y")
            x0, x1 = self.place(xr, s.get("x0"), "x"), self.place(xr, s.get("x1"), "x")
            y0, y1 = self.place(yr, s.get("y0"), "y"), self.place(yr, s.get("y1"), "y")
            if None in (x0, x1, y0, y1):
                continue
            ln = s.get("line") or {}
            stroke = _paint(ln.get("color") or "#444444")[0]
            width = _num(ln.get("width"))
            dash = DASH.get(str(ln.get("dash") or ""), "")
            st = f' stroke="{stroke}" stroke-width="{2 if width is None else width:g}"' if width != 0 else ' stroke="none"'  # fmt: skip
            st += f' stroke-dasharray="{dash}"' if dash else ""
            op = _num(s.get("opacity"))
            st += f' opacity="{op:g}"' if op is not None and op < 1 else ""
            if s.get("type") == "line":
                parts.append(f'<path d="M{_f(x0)},{_f(y0)}L{_f(x1)},{_f(y1)}"{st}/>')
            elif s.get("type", "rect") == "rect":
                fill = _paint(s.get("fillcolor") or "rgba(0,0,0,0)")[0]
                parts.append(f'<rect x="{_f(min(x0, x1))}" y="{_f(min(y0, y1))}" width="{_f(abs(x1 - x0))}" height="{_f(abs(y1 - y0))}" fill="{fill}"{st}/>')  # fmt: skip
        return "".join(parts)

    def draw_annotations(self) -> str:
        parts = []
        for a in self.layout.get("annotations") or ():
            if not a.get("text") or a.get("visible") is False:
                continue
            x = self.place(a.get("xref", "x"), a.get("x"), "x")
            y = self.place(a.get("yref", "y"), a.get("y"), "y")
            if x is None or y is None:
                continue
            anchor = {"left": "start", "right": "end"}.get(a.get("xanchor"), "middle")
            dy = {"bottom": -4, "top": 12}.get(a.get("yanchor"), 4)
            fs = _num((a.get("font") or {}).get("size")) or 13
            parts.append(f'<text x="{_f(x)}" y="{_f(y + dy)}" text-anchor="{anchor}" font-size="{fs:g}">{_text(a["text"])}</text>')  # fmt: skip
        return "".join(parts)

    # Axes and legend ----------------------------------------------------------------------
    def draw_axes(self) -> tuple[str, str]:
        grid, ink = [], []
        for a in self.axes.values():
            if not a.visible or a.name not in self.used:
                continue
            is_x = a.name.startswith("x")
            other = self.axis(a.spec.get("anchor") or ("y" if is_x else "x"), "y" if is_x else "x")
            o0, o1 = sorted(other.px)
            for u, label in a.ticks():
                p = a.px_of(u)
                if p is None or not min(a.px) - 0.5 <= p <= max(a.px) + 0.5:
                    continue
                if is_x:
                    grid.append(f"M{_f(p)},{_f(o0)}V{_f(o1)}")
                    ink.append(f'<text x="{_f(p)}" y="{_f(o1 + 15)}" text-anchor="middle">{_text(label)[:18]}</text>')  # fmt: skip
                else:
                    grid.append(f"M{_f(o0)},{_f(p)}H{_f(o1)}")
                    ink.append(f'<text x="{_f(o0 - 5)}" y="{_f(p + 4)}" text-anchor="end">{_text(label)[:18]}</text>')  # fmt: skip
            lo, hi = sorted(a.px)
            if is_x:
                ink.append(f'<path d="M{_f(lo)},{_f(o1)}H{_f(hi)}" stroke="{AXIS}"/>')
                if a.title:
                    ink.append(f'<text x="{_f((lo + hi) / 2)}" y="{_f(o1 + 34)}" text-anchor="middle" font-size="13">{_text(a.title)}</text>')  # fmt: skip
            else:
                ink.append(f'<path d="M{_f(o0)},{_f(lo)}V{_f(hi)}" stroke="{AXIS}"/>')
                if a.title:
                    x, y = o0 - 52, (lo + hi) / 2
                    ink.append(f'<text transform="translate({_f(x)},{_f(y)}) rotate(-90)" text-anchor="middle" font-size="13">{_text(a.title)}</text>')  # fmt: skip
        return (f'<path d="{"".join(grid)}" stroke="{GRID}"/>' if grid else ""), "".join(ink)

    def add_legend(self, t: dict, swatch: str) -> None:
        if t.get("showlegend") is False or t.get("type") == "heatmap":
            return
        group = t.get("legendgroup")
        if group and group in self.groups:
            return
        self.groups.add(group)
        self.legend.append((swatch, _text(t.get("name") or f"trace {self.data.index(t)}")))

    def draw_legend(self, top: float) -> tuple[str, float]:
        shown = self.layout.get("showlegend")
        entries = list(self.legend) if shown is not False else []
        if shown is None and len(entries) < 2:
            entries = []
        for (stops, lo, hi), title in self.colourbars.items():
            grad = self.ref("g", "", '<linearGradient id="{id}">' + "".join(
                f'<stop offset="{p:g}" stop-color="{c}"/>' for p, c in stops) + "</linearGradient>")  # fmt: skip
            entries.append((f'<rect x="0" y="-6" width="60" height="12" fill="url(#{grad})"/>', f"{_text(title)} {_tick_label(lo)} to {_tick_label(hi)}".strip()))  # fmt: skip
        parts, x, y = [], self.area[0] - 40, top
        x = max(x, 8)
        for swatch, label in entries:
            sw_w = 64 if 'width="60"' in swatch else 30
            w = sw_w + 6 + 6.6 * len(label) + 18
            if x + w > self.w - 8 and x > self.area[0] - 40:
                x, y = max(self.area[0] - 40, 8), y + 20
            parts.append(f'<g transform="translate({_f(x)},{_f(y)})">{swatch}<text x="{sw_w + 6}" y="4">{label}</text></g>')  # fmt: skip
            x += w
        return "".join(parts), (y - top + 24 if entries else 0)

    # Whole figure -------------------------------------------------------------------------
    def render(self, title: str | None) -> str:
        self.groups: set = set()
        self.colourbars: dict = {}
        self.ranges()
        self.used = set()
        body = []
        for i, t in enumerate(self.data):
            ax, ay = self.axes_of(t)
            if not self.visible(t):
                continue
            self.used |= {ax.name, ay.name}
            kind = t.get("type", "scatter")
            draw = {"bar": self.draw_bar, "heatmap": self.draw_heatmap}.get(kind, self.draw_scatter)
            clip = self.clip(ax, ay)
            op = _num(t.get("opacity"))
            extra = f' opacity="{op:g}"' if op is not None and op < 1 else ""
            body.append(f'<g class="trace" data-type="{escape(kind)}" data-name="{_text(t.get("name") or f"trace {i}")}" clip-path="url(#{clip})"{extra}>{draw(t, ax, ay)}</g>')  # fmt: skip
        grid, axes = self.draw_axes()
        title_text = self.layout.get("title")
        title_text = title_text.get("text") if isinstance(title_text, dict) else title_text
        heading = _text(title or title_text or "Chart")
        names = [label for _, label in self.legend]
        desc = f"{len(body)} series" + (": " + ", ".join(names) if names else "")
        for a in self.axes.values():
            if a.name in self.used and a.title:
                desc += f"; {a.name[0]} axis: {_text(a.title)}" + (" (log)" if a.type == "log" else "")  # fmt: skip
        legend, extra_h = self.draw_legend(self.h - 12)
        h = self.h + extra_h
        head = (f'<text x="{_f(self.area[0] - 40 if self.area[0] > 48 else 8)}" y="24" font-size="15">{_text(title_text)}</text>' if title_text else "")  # fmt: skip
        inner = (
            f'<title id="\0t">{heading}</title><desc id="\0d">{desc}</desc>'
            f"<defs>{self.render_defs()}</defs>"
            f'<rect width="{_f(self.w)}" height="{_f(h)}" fill="#FFFFFF"/>'
            f"{grid}{self.draw_shapes('below')}{''.join(body)}{self.draw_shapes('above')}"
            f"{axes}{self.draw_annotations()}{head}{legend}"
        )
        uid = "s" + hashlib.sha1(inner.encode()).hexdigest()[:8]
        inner = inner.replace("\0", uid)
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_f(self.w)} {_f(h)}" '
            f'width="{_f(self.w)}" style="max-width:100%;height:auto" role="img" '
            f'aria-labelledby="{uid}t {uid}d" font-family="sans-serif" font-size="12" '
            f'fill="{INK}">{inner}</svg>'
        )

    def clip(self, ax: _Axis, ay: _Axis) -> str:
        key = (ax.name, ay.name)
        if key not in self.clips:
            x0, x1 = sorted(ax.px)
            y0, y1 = sorted(ay.px)
            self.clips[key] = self.ref("c", "", f'<clipPath id="{{id}}"><rect x="{_f(x0 - 8)}" y="{_f(y0 - 8)}" width="{_f(x1 - x0 + 16)}" height="{_f(y1 - y0 + 16)}"/></clipPath>')  # fmt: skip
        return self.clips[key]

    def render_defs(self) -> str:
        return "".join(body.replace("{id}", ident) for ident, body in self.defs.items())


def figure_svg(fig, title: str | None = None) -> str:
    """Inline SVG of a plotly figure (a ``go.Figure``, its ``to_dict()``, or the JSON dict).

    Parameters
    ----------
    fig : dict or plotly figure
        The figure; ``to_dict()`` is called on anything that has it.
    title : str, optional
        Text for the picture's ``<title>`` (read by screen readers); default the figure's title.

    Returns
    -------
    str
        One ``<svg>`` element: no scripts, no external references. Each drawn trace is a
        ``<g class="trace">`` with its name in ``data-name``.
    """
    if hasattr(fig, "to_dict"):
        fig = fig.to_dict()
    return _Svg(fig).render(title)
