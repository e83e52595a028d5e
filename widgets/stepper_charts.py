"""Charts shared by MatmulStepper and KernelProfile, each drawn from a :class:`RunCursor`.

Every chart is a plotly FigureWidget built once with a fixed set of traces; ``draw_run``
redraws what depends on the run (only when the run changes), ``draw_cursor`` what depends on
the cursor (every step). Both update inside ``fig.batch_update()`` and compute nothing the
model has not already computed. Colours are Okabe-Ito; operations and operands are also told
apart by bar pattern (each legend entry its own), highlights by line dash.
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from trnlab.core import _program as P
from trnlab.units import si

from ._style import DASHES, base_layout, colour
from .stepper_model import HBMPicture, RunCursor

__all__ = ["GanttChart", "HBMChart", "MemoryMap", "RooflineChart", "counters_table"]

PATTERNS = ("", "/", "\\", "x", ".", "+", "-", "|")
# Operation groups of the timeline: (label, ops, colour index, pattern index).
OP_GROUPS = (
    ("DMA load", (P.DMA_LOAD,), 0, 7),
    ("DMA store", (P.DMA_STORE,), 5, 1),
    ("matmul / transpose", (P.MATMUL, P.TRANSPOSE), 1, 0),
    ("copy out of PSUM / cast", (P.COPY,), 2, 2),
    ("activation", (P.ACTIVATION,), 3, 3),
    ("vector op", (P.TENSOR_TENSOR, P.TENSOR_SCALAR, P.REDUCE, P.MEMSET, P.TENSOR_SCAN), 4, 4),
    ("GpSimd op", (P.GPSIMD_OP,), 6, 5),
    ("DMA copy (SBUF to SBUF, HBM to HBM)", (P.DMA_SBUF, P.DMA_HBM), 7, 6),
)
_GROUP_OF = {op: g for g, (_, ops, _, _) in enumerate(OP_GROUPS) for op in ops}
#: Operands coloured separately in the memory map (more share the last slot).
MAX_OPERANDS = 6
US = 1e6  # charts are in microseconds


def _ylabels(cursor: RunCursor) -> list[str]:
    return [name for _, name in cursor.engines()]


class GanttChart:
    """The engine timeline: one row per engine and per DMA queue (a queue's transfers run on the
    DMA engines that serve their partitions), a bar per instruction
    coloured by operation, the cursor as a vertical line, instructions in flight outlined."""

    def __init__(self, height: int = 380) -> None:
        self.fig = go.FigureWidget(layout=base_layout("Engine timeline", height))
        for label, _, c, pat in OP_GROUPS:
            self.fig.add_bar(
                name=label,
                orientation="h",
                marker={"color": colour(c), "pattern": {"shape": PATTERNS[pat]}},
                hoverinfo="text",
            )
        self.fig.add_bar(
            name="in flight at the cursor",
            orientation="h",
            marker={"color": "rgba(0,0,0,0)", "line": {"color": "#000000", "width": 3}},
            hoverinfo="skip",
        )
        self.fig.add_bar(
            name="DMA descriptors (software DGE)",
            orientation="h",
            marker={"color": colour(6), "pattern": {"shape": PATTERNS[6]}},
            hoverinfo="text",
            visible=False,
        )
        self.fig.update_layout(
            barmode="overlay",
            xaxis_title="time (us)",
            yaxis={"type": "category", "autorange": "reversed"},
            legend={"orientation": "h", "y": -0.25},
            margin={"l": 90, "r": 20, "t": 50, "b": 110},
        )
        self._engine = np.zeros(0, np.int64)

    def draw_run(self, cursor: RunCursor) -> None:
        g = cursor.gantt()
        names = dict(cursor.engines())
        prog = cursor.run.program
        group = np.array([_GROUP_OF[int(o)] for o in g["op"]], np.int64)
        with self.fig.batch_update():
            for k, trace in enumerate(self.fig.data[: len(OP_GROUPS)]):
                sel = np.flatnonzero(group == k)
                trace.y = [names[int(e)] for e in g["engine"][sel]]
                trace.base = g["start"][sel] * US
                trace.x = (g["end"][sel] - g["start"][sel]) * US
                trace.hovertext = [
                    html.escape(prog.describe(int(g["index"][i])))
                    + (f"<br>(+{g['count'][i] - 1} more merged)" if g["count"][i] > 1 else "")
                    + f"<br>{g['start'][i] * US:,.3f} - {g['end'][i] * US:,.3f} us"
                    for i in sel
                ]
                trace.visible = bool(len(sel))
            d = cursor.descriptor_bars()
            desc = self.fig.data[len(OP_GROUPS) + 1]
            desc.y = [names[int(e)] for e in d["engine"]]
            desc.base = d["start"] * US
            desc.x = (d["end"] - d["start"]) * US
            desc.hovertext = [
                "GpSimd writes the descriptors of<br>"
                + html.escape(prog.describe(int(d["index"][i])))
                + (f"<br>(+{d['count'][i] - 1} more merged)" if d["count"][i] > 1 else "")
                for i in range(len(d["start"]))
            ]
            desc.visible = bool(len(d["start"]))
            self.fig.layout.yaxis.categoryarray = _ylabels(cursor)
            self.fig.layout.xaxis.range = [0, cursor.run.latency * US * 1.01]
            self.fig.layout.title.text = (
                f"Engine timeline: {len(prog)} instructions, {cursor.run.latency * US:,.2f} us"
            )

    def draw_cursor(self, cursor: RunCursor) -> None:
        flight = cursor.in_flight() if not cursor.at_end else np.zeros(0, np.int64)
        r = cursor.run
        names = dict(cursor.engines())
        eng = cursor.table["engine"][flight]
        t = cursor.time * US
        with self.fig.batch_update():
            hl = self.fig.data[len(OP_GROUPS)]
            hl.y = [names[int(e)] for e in eng]
            hl.base = r.start[flight] * US
            hl.x = (r.end[flight] - r.start[flight]) * US
            self.fig.layout.shapes = [
                {
                    "type": "line",
                    "x0": t,
                    "x1": t,
                    "yref": "paper",
                    "y0": 0,
                    "y1": 1,
                    "line": {"color": colour(3), "width": 2, "dash": "dash"},
                }
            ]


class MemoryMap:
    """SBUF (128 partitions x bytes per partition) and the PSUM banks at the cursor: tiles
    as boxes coloured (and patterned) by operand; solid while they hold live data, faint
    otherwise; outlined while an instruction in flight uses them."""

    def __init__(self, height: int = 300) -> None:
        fig = make_subplots(
            rows=1,
            cols=2,
            column_widths=[0.78, 0.22],
            subplot_titles=("SBUF (usable bytes per partition)", "PSUM"),
            horizontal_spacing=0.06,
        )
        self.fig = go.FigureWidget(fig)
        self.fig.update_layout(**base_layout("Memories at the cursor", height))
        self.fig.update_layout(barmode="overlay", legend={"orientation": "h", "y": -0.3})
        for k in range(MAX_OPERANDS):
            self.fig.add_bar(
                name=f"operand {k}",
                marker={"color": colour(k), "pattern": {"shape": PATTERNS[k]}},
                hoverinfo="text",
                visible=False,
                row=1,
                col=1,
            )
        self.fig.add_bar(
            name="partial sums (PSUM)",
            marker={"color": colour(3), "pattern": {"shape": PATTERNS[6]}},
            hoverinfo="text",
            row=1,
            col=2,
        )
        self.fig.update_yaxes(title_text="partitions", range=[0, 128], row=1, col=1)
        self.fig.update_yaxes(range=[0, 128], row=1, col=2)
        self.fig.update_xaxes(title_text="bytes per partition (KiB)", row=1, col=1)
        self.fig.update_xaxes(title_text="bank", dtick=1, row=1, col=2)

    @staticmethod
    def _bars(trace, boxes, scale, hover_unit):
        trace.x = [(b.start + b.size / 2) / scale for b in boxes]
        trace.width = [b.size / scale for b in boxes]
        trace.y = [b.partitions for b in boxes]
        trace.base = [0] * len(boxes)
        trace.marker.opacity = [1.0 if b.live else 0.18 for b in boxes]
        trace.marker.line.color = "#000000"
        trace.marker.line.width = [3 if b.active else 0 for b in boxes]
        trace.hovertext = [
            f"<b>{html.escape(b.name)}</b> ({html.escape(b.operand)}, {b.fmt})<br>"
            f"{b.partitions} partitions x {b.size:,} {hover_unit} at {b.start:,}<br>"
            + ("in use by an instruction in flight" if b.active else "")
            + ("holds live data" if b.live and not b.active else "")
            + ("" if b.live else "idle (allocated; no live data now)")
            for b in boxes
        ]

    def draw(self, cursor: RunCursor) -> None:
        sbuf, psum = cursor.tiles("sbuf"), cursor.tiles("psum")
        operands = [o for o in cursor.operands() if o != "partial sums"]
        slots = {o: min(i, MAX_OPERANDS - 1) for i, o in enumerate(operands)}
        p = cursor.run.params
        with self.fig.batch_update():
            for k, trace in enumerate(self.fig.data[:MAX_OPERANDS]):
                mine = [b for b in sbuf if slots.get(b.operand) == k]
                names = [o for o in operands if slots[o] == k]
                trace.visible = bool(names)
                trace.name = ", ".join(names) if len(names) <= 2 else "others"
                self._bars(trace, mine, 1024, "bytes")
            self._bars(self.fig.data[MAX_OPERANDS], psum, 1, "bank(s)")
            self.fig.layout.xaxis.range = [0, p.sbuf_usable_partition_bytes / 1024]
            self.fig.layout.xaxis2.range = [0, p.psum_banks]
            live = sum(b.size for b in sbuf if b.live)
            self.fig.layout.title.text = (
                f"Memories at the cursor: SBUF {live / 1024:,.1f} of "
                f"{p.sbuf_usable_partition_bytes / 1024:,.0f} KiB usable per partition in use; PSUM "
                f"{sum(b.size for b in psum if b.live)} of {p.psum_banks} banks"
            )


class HBMChart:
    """HBM tensors as grids: how often each part has been loaded (or stored) so far, with
    the regions DMA transfers in flight are moving (solid outline) and those the engines in
    flight are working on (dotted outline)."""

    def __init__(self, titles: tuple[str, ...], height: int = 330) -> None:
        fig = make_subplots(rows=1, cols=len(titles), subplot_titles=titles)
        self.fig = go.FigureWidget(fig)
        self.fig.update_layout(**base_layout("", height))
        self.fig.update_layout(
            coloraxis={"colorscale": "cividis", "cmin": 0, "colorbar": {"title": "times"}},
            legend={"orientation": "h", "y": -0.15},
        )
        self.n = len(titles)
        for j in range(self.n):
            self.fig.add_heatmap(
                coloraxis="coloraxis",
                hovertemplate="row ~%{y:.0f}, column ~%{x:.0f}: %{z} times<extra></extra>",
                row=1,
                col=j + 1,
                name=titles[j],
            )
        for j in range(self.n):
            for label, c, dash in (
                ("moved by a DMA in flight", colour(3), DASHES[0]),
                ("used by an engine in flight", colour(7), DASHES[2]),
            ):
                self.fig.add_scatter(
                    mode="lines",
                    name=label,
                    legendgroup=label,
                    showlegend=j == 0,
                    line={"color": c, "width": 3, "dash": dash},
                    hoverinfo="skip",
                    row=1,
                    col=j + 1,
                )
        for j in range(self.n):
            self.fig.update_yaxes(autorange="reversed", row=1, col=j + 1)

    @staticmethod
    def _outline(rects):
        xs, ys = [], []
        for r0, r1, c0, c1 in rects:
            xs += [c0, c1, c1, c0, c0, None]
            ys += [r0, r0, r1, r1, r0, None]
        return xs, ys

    def draw(
        self, pictures: list[HBMPicture], titles: list[str] | None = None, title: str = ""
    ) -> None:
        top = max([1] + [int(p.counts.max()) for p in pictures])
        with self.fig.batch_update():
            for j, pic in enumerate(pictures):
                heat = self.fig.data[j]
                cr, cc = pic.cell
                heat.z = pic.counts
                heat.x = (np.arange(pic.counts.shape[1]) + 0.5) * cc
                heat.y = (np.arange(pic.counts.shape[0]) + 0.5) * cr
                for k, rects in enumerate((pic.moving, pic.working)):
                    tr = self.fig.data[self.n + 2 * j + k]
                    tr.x, tr.y = self._outline(rects)
                self.fig.update_xaxes(range=[0, pic.shape[1]], row=1, col=j + 1)
                self.fig.update_yaxes(range=[pic.shape[0], 0], row=1, col=j + 1)
            self.fig.layout.coloraxis.cmax = top
            self.fig.layout.title.text = title
            if titles:
                for ann, title in zip(self.fig.layout.annotations, titles, strict=False):
                    ann.text = title


class RooflineChart:
    """The roofline of the core (log-log): the run's point, its path so far, and the cursor."""

    def __init__(self, height: int = 330) -> None:
        self.fig = go.FigureWidget(layout=base_layout("Roofline", height))
        self.fig.add_scatter(
            name="roofline", mode="lines", line={"color": colour(7), "width": 2}, hoverinfo="text"
        )
        self.fig.add_scatter(
            name="path so far",
            mode="lines+markers",
            line={"color": colour(5), "dash": "dot"},
            marker={"size": 4, "symbol": "circle"},
            hoverinfo="skip",
        )
        self.fig.add_scatter(
            name="whole run",
            mode="markers",
            marker={"color": colour(0), "size": 13, "symbol": "diamond"},
            hoverinfo="text",
        )
        self.fig.add_scatter(
            name="at the cursor",
            mode="markers",
            marker={"color": colour(3), "size": 12, "symbol": "circle-open", "line": {"width": 3}},
            hoverinfo="text",
        )
        self.fig.update_layout(
            xaxis={"type": "log", "title": "arithmetic intensity (FLOP per HBM byte)"},
            yaxis={"type": "log", "title": "FLOP/s"},
            legend={"orientation": "h", "y": -0.3},
        )
        self._traj = None

    def draw_run(self, cursor: RunCursor) -> None:
        roof = cursor.run.roofline()
        tr = cursor.trajectory()
        self._traj = tr
        peak, bw = roof["peak_flops"], roof["bandwidth"]
        lo = min([1.0, *tr["intensity"][:1]]) / 2
        hi = max(4 * roof["ridge_intensity"], 2 * (roof["intensity"] if peak else 1))
        xs = np.geomspace(lo, hi, 64)
        with self.fig.batch_update():
            line, _, run_pt, _ = self.fig.data
            ys = np.minimum(peak, bw * xs) if peak else bw * xs
            line.x, line.y = xs, ys
            line.hovertext = [
                f"{x:,.1f} FLOP/B: at most {si(y, 'FLOP/s')}" for x, y in zip(xs, ys, strict=True)
            ]
            run_pt.x, run_pt.y = [roof["intensity"]], [roof["achieved_flops"]]
            run_pt.hovertext = [
                f"whole run: {roof['intensity']:,.1f} FLOP/B, {si(roof['achieved_flops'], 'FLOP/s')}"
                f" of {si(roof['attainable_flops'], 'FLOP/s')} attainable"
            ]
            self.fig.layout.title.text = (
                f"Roofline of {cursor.run.params.name}: peak {si(peak, 'FLOP/s')}, DMA "
                f"{si(bw, 'B/s')}, ridge {roof['ridge_intensity']:,.0f} FLOP/B"
            )

    def draw_cursor(self, cursor: RunCursor) -> None:
        tr = self._traj if self._traj is not None else cursor.trajectory()
        upto = tr["step"] <= cursor.position
        c = cursor.counters()
        with self.fig.batch_update():
            _, path, _, now = self.fig.data
            path.x, path.y = tr["intensity"][upto], tr["achieved_flops"][upto]
            if c["hbm_bytes"] > 0 and c["flops"] > 0:
                now.x, now.y = [c["intensity"]], [c["achieved_flops"]]
                now.hovertext = [
                    f"so far: {c['intensity']:,.1f} FLOP/B, {si(c['achieved_flops'], 'FLOP/s')}"
                ]
            else:
                now.x, now.y = [], []


def counters_table(cursor: RunCursor) -> str:
    """The running counters as a small HTML table (the text beside the charts)."""
    c = cursor.counters()
    rows = (
        ("time", f"{c['time_s'] * US:,.3f} of {c['latency_s'] * US:,.3f} us"),
        ("step", f"{min(c['step'] + 1, c['steps'])} of {c['steps']}"),
        ("instructions finished", f"{c['instructions_done']:,} ({c['in_flight']} in flight)"),
        ("HBM bytes moved", f"{si(c['hbm_bytes'], 'B')} of {si(c['total_hbm_bytes'], 'B')}"),
        ("Tensor Engine FLOPs", f"{si(c['flops'], 'FLOP')} of {si(c['total_flops'], 'FLOP')}"),
        ("achieved so far", si(c["achieved_flops"], "FLOP/s")),
        ("utilisation so far", f"{c['utilisation']:.1%} (run: {cursor.run.utilisation:.1%})"),
        ("intensity so far", f"{c['intensity']:,.1f} FLOP/B"),
        ("SBUF in use", f"{c['sbuf_bytes_per_partition'] / 1024:,.2f} KiB per partition"),
        ("PSUM in use", f"{c['psum_bytes_per_partition'] / 1024:,.2f} KiB per partition"),
    )
    body = "".join(
        f"<tr><td style='text-align:left'>{k}</td><td style='text-align:right'>{v}</td></tr>"
        for k, v in rows
    )
    return f"<table><tbody>{body}</tbody></table>"
