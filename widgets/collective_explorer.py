"""CollectiveExplorer: a collective on a Trainium fabric, swept, drawn and animated.

Top: time and bus bandwidth against message size (closed forms, 1 KiB to 8 GiB), with the
latency-bound region shaded. Middle: the fabric with each link coloured (and thickened) by its
load in the drawn case, beside a ring all-reduce played step by step. Bottom: all-to-all on the
Trn2 UltraServer's torus against the Trn3 NeuronSwitch UltraServers. Each chart has a sentence
of numbers under it. The model is :class:`~trnlab.widgets.collective_model.CollectiveModel`.
"""

from __future__ import annotations

import html

import ipywidgets as W
import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from trnlab.fabric import ALGORITHMS, NODE_KINDS, TIER_NAMES
from trnlab.units import binary

from ._style import CIVIDIS_STEPS, DASHES, base_layout, colour, symbol
from ._view import Dashboard
from .collective_model import DRAW_SIZES, RING_CHIPS, CollectiveModel, duration, rate

__all__ = ["CollectiveExplorer"]

NAMES = (*ALGORITHMS, "auto")  # fixed order: each algorithm keeps its colour, marker and dash
# Link load: cividis (readable with every common colour-vision deficiency), and the line gets
# thicker as the load grows, so load is never told by colour alone; idle links are dotted.
LOAD_BINS = (0.0, 0.25, 0.5, 0.75, 0.9, 1.0 + 1e-9)
LOAD_COLOURS = CIVIDIS_STEPS
LOAD_WIDTHS = (1.5, 2.5, 3.5, 5.0, 6.5)
NODE_SYMBOLS = ("circle", "square", "diamond", "hexagon")  # chip, sled, NeuronSwitch, EFA
COMPARED = {
    "trn2-ultraserver": ("Trn2 UltraServer, 4x4x4 torus", 0, "circle", "solid"),
    "trn3-ultraserver-gen1": ("Trn3 Gen1, NeuronSwitch, 64 chips", 2, "square", "dash"),
    "trn3-ultraserver-gen2": ("Trn3 Gen2, NeuronSwitch, 144 chips", 3, "diamond", "dot"),
}


def _style(name: str) -> dict:
    if name == "auto":
        return {"color": "#000000", "symbol": "star", "dash": "solid"}
    i = NAMES.index(name)
    return {"color": colour(i), "symbol": symbol(i), "dash": DASHES[(i + 1) % len(DASHES)]}


class CollectiveExplorer(Dashboard):
    """Explore collectives: size sweep, link load on the fabric, ring steps, torus vs switch.

    Parameters are those of :class:`~trnlab.widgets.collective_model.CollectiveModel`.

    Examples
    --------
    >>> from trnlab.widgets import CollectiveExplorer
    >>> CollectiveExplorer(system="trn2.48xlarge", op="all_reduce")  # doctest: +SKIP
    """

    def __init__(self, **settings) -> None:
        super().__init__()
        self.model = m = CollectiveModel(**settings)
        self._drawn: dict[str, tuple] = {}
        self._build_figures()
        style = {"description_width": "initial"}
        self.system = W.Dropdown(
            options=m.systems(), value=m.system, description="System",
            tooltip="the fabric: NeuronLink torus (Trn1, Trn2) or NeuronSwitch (Trn3)",
            style=style,
        )  # fmt: skip
        self.parts = W.Dropdown(
            options=m.parts_options(), value=m.parts, description="Copies",
            tooltip="one system, or an UltraCluster of several joined by EFA (scale-out); "
                    "offered only for systems whose EFA bandwidth the catalogue has",
            style=style,
        )  # fmt: skip
        self.op = W.Dropdown(
            options=[(o.replace("_", "-"), o) for o in
                     ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast")],
            value=m.op, description="Collective", tooltip="which collective to time",
            style=style,
        )  # fmt: skip
        self.algorithm = W.Dropdown(
            options=m.algorithms(), value=m.algorithm, description="Algorithm",
            tooltip="auto picks what the Neuron runtime would at each size (mesh below about "
                    "1 MB, recursive doubling to 56 MB, rings above; hierarchical across EFA), "
                    "not the fastest; only algorithms that fit this fabric are listed",
            style=style,
        )  # fmt: skip
        self.size = W.SelectionSlider(
            options=[(binary(s), s) for s in DRAW_SIZES], value=m.nbytes,
            description="Drawn size", continuous_update=False,
            tooltip="message size of the drawn case (the star on the sweep; the simulation)",
            style=style, layout={"width": "480px"},
        )  # fmt: skip
        self.ring_chips = W.IntSlider(
            min=RING_CHIPS[0], max=RING_CHIPS[-1], value=m.ring_chips,
            description="Ring chips", continuous_update=False,
            tooltip="chips in the ring all-reduce animation", style=style,
        )  # fmt: skip
        self.step = W.IntSlider(
            min=0, max=2 * (m.ring_chips - 1), value=m.step, description="Step",
            tooltip="0 = before the first step; reduce-scatter, then all-gather", style=style,
        )  # fmt: skip
        self.play = W.Play(
            min=0, max=self.step.max, value=m.step, interval=900, description="Play",
            tooltip="play the ring all-reduce step by step",
        )  # fmt: skip
        W.jslink((self.play, "value"), (self.step, "value"))
        self.summary, self.anim_summary, self.a2a_summary = W.HTML(), W.HTML(), W.HTML()
        self._bind(self.system, self.parts, self.op, self.algorithm, self.size,
                   self.ring_chips, self.step)  # fmt: skip
        self.widget = W.VBox(
            [
                W.HBox([self.system, self.parts, self.op, self.algorithm]),
                self.size,
                self.message,
                self.sweep_fig,
                self.summary,
                W.HBox([self.fabric_fig, W.VBox([self.anim_fig,
                        W.HBox([self.play, self.step, self.ring_chips]), self.anim_summary])]),
                self.a2a_fig,
                self.a2a_summary,
            ]
        )  # fmt: skip
        self.redraw()

    # Figures ----------------------------------------------------------------------------------
    def _build_figures(self) -> None:
        sweep = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                              subplot_titles=("Time", "Bus bandwidth"))  # fmt: skip
        self.sweep_fig = go.FigureWidget(sweep)
        self.sweep_fig.update_layout(**base_layout("", 400), legend={"orientation": "h", "y": -0.3})
        for name in NAMES:
            st = _style(name)
            for col in (1, 2):
                self.sweep_fig.add_scatter(
                    name=name, legendgroup=name, showlegend=col == 1, mode="lines+markers",
                    line={"color": st["color"], "dash": st["dash"]},
                    marker={"symbol": st["symbol"], "color": st["color"], "maxdisplayed": 10},
                    hoverinfo="text", visible=False, row=1, col=col,
                )  # fmt: skip
        for name, dash in (("latency term", "dot"), ("bandwidth term", "dash")):
            self.sweep_fig.add_scatter(name=name, mode="lines", hoverinfo="name",
                                       line={"color": "#999999", "dash": dash, "width": 1.5},
                                       row=1, col=1)  # fmt: skip
        for col in (1, 2):
            self.sweep_fig.add_scatter(
                name="drawn size", showlegend=col == 1, mode="markers", hoverinfo="text",
                marker={"symbol": "star", "size": 16, "color": colour(3),
                        "line": {"width": 1, "color": "#000000"}},
                row=1, col=col,
            )  # fmt: skip
        self.sweep_fig.update_xaxes(type="log", title_text="message size (bytes, log)")
        self.sweep_fig.update_yaxes(type="log", title_text="time (s, log)", row=1, col=1)
        self.sweep_fig.update_yaxes(title_text="bus bandwidth (B/s)", row=1, col=2)

        self.fabric_fig = go.FigureWidget(layout=base_layout("Link load", 470))
        self.fabric_fig.add_scatter(name="idle or not simulated", mode="lines", hoverinfo="skip",
                                    line={"color": "#CCCCCC", "width": 1, "dash": "dot"})  # fmt: skip
        for i, (c, w) in enumerate(zip(LOAD_COLOURS, LOAD_WIDTHS, strict=True)):
            lo, hi = LOAD_BINS[i], min(LOAD_BINS[i + 1], 1.0)
            self.fabric_fig.add_scatter(name=f"{lo:.0%}-{hi:.0%} busy", mode="lines",
                                        hoverinfo="skip", line={"color": c, "width": w})  # fmt: skip
        self.fabric_fig.add_scatter(
            name="link (hover)", mode="markers", hoverinfo="text", showlegend=False,
            marker={"size": 7, "color": [], "colorscale": "Cividis", "cmin": 0, "cmax": 1,
                    "colorbar": {"title": {"text": "busy"}, "tickformat": ".0%", "len": 0.6}},
        )  # fmt: skip
        self.fabric_fig.add_scatter(name="chips", mode="markers+text", hoverinfo="text",
                                    textposition="middle center", textfont={"size": 9},
                                    marker={"size": 14, "color": "#FFFFFF",
                                            "line": {"width": 1.5, "color": "#000000"}})  # fmt: skip
        self.fabric_fig.add_scatter(name="switches", mode="markers", hoverinfo="text",
                                    marker={"size": 16, "color": colour(1),
                                            "line": {"width": 1, "color": "#000000"}})  # fmt: skip
        self.fabric_fig.update_layout(
            xaxis={"visible": False}, legend={"orientation": "h", "y": -0.05},
            yaxis={"visible": False, "scaleanchor": "x"}, width=560,
        )  # fmt: skip

        anim = make_subplots(rows=1, cols=2, column_widths=[0.45, 0.55], horizontal_spacing=0.08,
                             subplot_titles=("Who sends which chunk", "Chips summed into each chunk"))  # fmt: skip
        self.anim_fig = go.FigureWidget(anim)
        self.anim_fig.update_layout(**base_layout("Ring all-reduce, step by step", 340),
                                    showlegend=False, width=620)  # fmt: skip
        self.anim_fig.add_scatter(mode="lines", hoverinfo="skip", row=1, col=1,
                                  line={"color": colour(0), "width": 3})  # fmt: skip
        self.anim_fig.add_scatter(mode="markers+text", hoverinfo="text", row=1, col=1,
                                  textfont={"size": 11, "color": "#000000"},
                                  marker={"symbol": "triangle-right", "size": 18,
                                          "color": colour(1), "angleref": "previous"})  # fmt: skip
        self.anim_fig.add_scatter(mode="markers+text", hoverinfo="text", row=1, col=1,
                                  textposition="middle center",
                                  marker={"size": 30, "color": "#FFFFFF",
                                          "line": {"width": 2, "color": "#000000"}})  # fmt: skip
        self.anim_fig.add_heatmap(colorscale="Cividis", texttemplate="%{text}", row=1, col=2,
                                  hoverinfo="text", colorbar={"title": {"text": "chips"}})  # fmt: skip
        self.anim_fig.update_xaxes(visible=False, row=1, col=1)
        self.anim_fig.update_yaxes(visible=False, scaleanchor="x", row=1, col=1)
        self.anim_fig.update_yaxes(autorange="reversed", row=1, col=2)

        self.a2a_fig = go.FigureWidget(layout=base_layout("All-to-all: torus against switch", 400))
        for label, c, sym, dash in COMPARED.values():
            self.a2a_fig.add_scatter(name=label, mode="lines+markers", hoverinfo="text",
                                     line={"color": colour(c), "dash": dash},
                                     marker={"symbol": sym, "color": colour(c), "size": 8,
                                             "maxdisplayed": 12})  # fmt: skip
        self.a2a_fig.add_scatter(name="Trn2 bisection bound", mode="lines", hoverinfo="text",
                                 line={"color": colour(0), "dash": "longdashdot", "width": 1.5})  # fmt: skip
        self.a2a_fig.add_scatter(name="drawn size", mode="markers", hoverinfo="text",
                                 marker={"symbol": "star", "size": 14, "color": colour(3),
                                         "line": {"width": 1, "color": "#000000"}})  # fmt: skip
        self.a2a_fig.update_layout(xaxis={"type": "log", "title": "send buffer per chip (bytes)"},
                                   yaxis={"type": "log", "title": "time (s, log)"})  # fmt: skip

    # Controls -> model ----------------------------------------------------------------------
    def _apply(self, change) -> None:
        owner = change["owner"]
        if owner is self.system:  # copies and algorithm follow the model's rules for a system
            self.model.set(system=self.system.value)
        elif owner is self.parts:
            self.model.set(parts=self.parts.value)
        elif owner is self.op:
            self.model.set(op=self.op.value)
        elif owner is self.algorithm:
            self.model.set(algorithm=self.algorithm.value)
        elif owner is self.size:
            self.model.set(nbytes=self.size.value)
        elif owner is self.ring_chips:
            self.model.set(ring_chips=self.ring_chips.value)
        else:
            self.model.set(step=self.step.value)

    def _sync_controls(self) -> None:
        m = self.model
        self.system.value, self.op.value = m.system, m.op
        copies = tuple(m.parts_options())
        if tuple(self.parts.options) != copies:
            self.parts.options = copies
        self.parts.value = m.parts
        self.parts.disabled = len(copies) == 1
        self.algorithm.options = m.algorithms()
        self.algorithm.value = m.algorithm
        self.size.value, self.ring_chips.value = m.nbytes, m.ring_chips
        self.step.max = self.play.max = 2 * (m.ring_chips - 1)
        self.step.value = m.step

    # Model -> picture -----------------------------------------------------------------------
    def redraw(self) -> None:
        """Redraw the panels whose inputs changed (a step change redraws only the ring)."""
        m = self.model
        keys = {
            "sweep": (m.system, m.parts, m.op, m.algorithm, m.nbytes),
            "fabric": (m.system, m.parts, m.op, m.algorithm, m.nbytes),
            "anim": (m.system, m.parts, m.nbytes, m.ring_chips, m.step),
            "a2a": (m.nbytes,),
        }
        for panel, key in keys.items():
            if self._drawn.get(panel) != key:
                getattr(self, f"_draw_{panel}")()
                self._drawn[panel] = key

    def _draw_sweep(self) -> None:
        m = self.model
        sw, reg = m.sweep(), m.regimes()
        x = sw.sizes
        chosen = m.algorithm
        with self.sweep_fig.batch_update():
            for i, name in enumerate(NAMES):
                t_tr, b_tr = self.sweep_fig.data[2 * i], self.sweep_fig.data[2 * i + 1]
                on = name in sw.time
                t_tr.visible = b_tr.visible = on
                if not on:
                    continue
                label = name + (" (lower bound)" if sw.kind[name] == "bound" else "")
                width = 4 if name == chosen else 1.5
                picks = sw.auto_picks if name == "auto" else [name] * len(x)
                for tr, y, fmt in ((t_tr, sw.time[name], duration), (b_tr, sw.busbw[name], rate)):
                    tr.x, tr.y, tr.name = x, y, label
                    tr.line.width = width
                    tr.opacity = 1.0 if name == chosen else 0.55
                    tr.hovertext = [f"{label} ({p})<br>{binary(s)}: {fmt(v)}"
                                    for s, v, p in zip(x, y, picks, strict=True)]  # fmt: skip
            lat, bw = self.sweep_fig.data[2 * len(NAMES)], self.sweep_fig.data[2 * len(NAMES) + 1]
            lat.x, lat.y = [x[0], x[-1]], [reg.latency, reg.latency]
            lat.name = f"latency term {duration(reg.latency)} ({reg.algorithm})"
            bw.x, bw.y = x, x * reg.per_byte
            res, _ = m.result()
            stars = self.sweep_fig.data[2 * len(NAMES) + 2 :]
            for tr, y, text in ((stars[0], res.time, duration(res.time)),
                                (stars[1], res.busbw, rate(res.busbw))):  # fmt: skip
                tr.x, tr.y = [m.nbytes], [y]
                tr.hovertext = [f"drawn: {binary(m.nbytes)}, {res.algorithm}: {text}"]
            self.sweep_fig.layout.shapes = [
                {"type": "rect", "xref": f"x{'' if c == 1 else c}", "yref": "paper",
                 "x0": x[0], "x1": reg.crossover, "y0": 0, "y1": 1, "fillcolor": "#E69F00",
                 "opacity": 0.12, "line": {"width": 0}, "layer": "below"}
                for c in (1, 2)
            ]  # fmt: skip
            whose = reg.algorithm + (
                f", auto's pick at {binary(m.nbytes)}" if m.algorithm == "auto" else ""
            )
            self.sweep_fig.layout.title.text = (
                f"{m.op.replace('_', '-')} on {m.topology.name}: {whose}, latency-bound "
                f"(shaded) below {binary(reg.crossover)}"
            )
        self.summary.value = f"<p>{html.escape(m.summary())}</p>"

    def _draw_fabric(self) -> None:
        m = self.model
        d = m.drawing()
        res, why = m.result()
        load = d.load if d.load is not None else np.zeros(len(d.ends))
        with self.fabric_fig.batch_update():
            traces = self.fabric_fig.data
            idle = load <= 0 if d.load is not None else np.ones(len(d.ends), bool)
            traces[0].x, traces[0].y = _lines(d.path[idle])
            for b in range(len(LOAD_COLOURS)):
                sel = ~idle & (load >= LOAD_BINS[b]) & (load < LOAD_BINS[b + 1])
                traces[1 + b].x, traces[1 + b].y = _lines(d.path[sel])
            mid = d.path[:, d.path.shape[1] // 2, :]
            hover = traces[1 + len(LOAD_COLOURS)]
            hover.x, hover.y = mid[:, 0], mid[:, 1]
            hover.marker.color = load
            hover.hovertext = _link_hover(d, why)
            chips = d.node_kind == 0
            xy = d.node_xy
            idx = np.flatnonzero(chips)
            label = d.chips <= 64
            traces[-2].x, traces[-2].y = xy[chips, 0], xy[chips, 1]
            traces[-2].text = [str(i) if label else "" for i in range(len(idx))]
            traces[-2].marker.size = 14 if label else 6
            traces[-2].hovertext = [f"chip {i}" for i in range(len(idx))]
            sw = ~chips
            traces[-1].x, traces[-1].y = xy[sw, 0], xy[sw, 1]
            traces[-1].marker.symbol = [NODE_SYMBOLS[k] for k in d.node_kind[sw]]
            traces[-1].hovertext = [NODE_KINDS[k] for k in d.node_kind[sw]]
            how = "simulated" if res.simulated else "closed form, not simulated"
            self.fabric_fig.layout.title.text = f"Link load: {m.op.replace('_', '-')} of {binary(m.nbytes)}, {res.algorithm} ({how})"

    def _draw_anim(self) -> None:
        m = self.model
        a = m.animation()
        n, k = a.n, m.step
        ang = np.pi / 2 - 2 * np.pi * np.arange(n) / n  # clockwise from the top
        pos = np.column_stack([np.cos(ang), np.sin(ang)])
        ring_x, ring_y = _lines(np.stack([pos, np.roll(pos, -1, axis=0)], axis=1))
        sends = a.sends[k - 1] if k > 0 else []
        with self.anim_fig.batch_update():
            links, arrows, chips, heat = self.anim_fig.data
            links.x, links.y = ring_x, ring_y
            links.line.color = colour(0) if sends else "#CCCCCC"
            mid = [0.55 * pos[s] + 0.45 * pos[t] for s, t, _ in sends]
            arrows.x = [p[0] * 0.92 for p in mid]
            arrows.y = [p[1] * 0.92 for p in mid]
            arrows.text = [f"c{c}" for *_, c in sends]
            arrows.textposition = "middle left"
            arrows.hovertext = [f"chip {s} -> chip {t}: chunk {c}" for s, t, c in sends]
            chips.x, chips.y = pos[:, 0], pos[:, 1]
            chips.text = [str(i) for i in range(n)]
            chips.hovertext = [f"chip {i}" for i in range(n)]
            held = a.held[k]
            heat.z = held
            heat.zmin, heat.zmax = 1, n
            heat.x = [f"chunk {j}" for j in range(n)]
            heat.y = [f"chip {i}" for i in range(n)]
            heat.text = [[f"{v}" + (" ✓" if v == n else "") for v in row] for row in held]
            heat.hovertext = [[f"chip {i}, chunk {j}: sum of {v} of {n} chips"
                               for j, v in enumerate(row)] for i, row in enumerate(held)]  # fmt: skip
            self.anim_fig.layout.title.text = (
                f"Ring all-reduce on {n} chips: step {k} of {a.steps} ({a.phase(k)})"
            )
        self.anim_summary.value = f"<p>{html.escape(m.animation_summary())}</p>"

    def _draw_a2a(self) -> None:
        m = self.model
        a = m.all_to_all()
        at = m.all_to_all_at()
        with self.a2a_fig.batch_update():
            for tr, key in zip(self.a2a_fig.data, COMPARED, strict=False):
                label = f"{COMPARED[key][0]} ({a.algorithm[key]})"
                tr.x, tr.y, tr.name = a.sizes, a.time[key], label
                tr.hovertext = [f"{label}<br>{binary(s)}: {duration(t)}"
                                for s, t in zip(a.sizes, a.time[key], strict=True)]  # fmt: skip
            bound = self.a2a_fig.data[len(COMPARED)]
            b = a.bound["trn2-ultraserver"]
            bound.x, bound.y = a.sizes, b
            bound.name = (f"Trn2 bisection bound (nS/4 / "
                          f"{a.bisection['trn2-ultraserver'] / 1e12:.3g} TB/s)")  # fmt: skip
            bound.hovertext = [f"bisection bound, {binary(s)}: {duration(t)}"
                               for s, t in zip(a.sizes, b, strict=True)]  # fmt: skip
            star = self.a2a_fig.data[-1]
            star.x = [m.nbytes] * len(at)
            star.y = [r.time for r in at.values()]
            star.hovertext = [f"{COMPARED[k][0]}: {duration(r.time)}" for k, r in at.items()]
        self.a2a_summary.value = f"<p>{html.escape(m.all_to_all_summary())}</p>"


def _lines(paths: np.ndarray) -> tuple[list, list]:
    """Polylines (k, points, 2) as one x list and one y list with None between lines."""
    if len(paths) == 0:
        return [], []
    k = paths.shape[0]
    gap = np.full((k, 1), np.nan)
    xs = np.concatenate([paths[:, :, 0], gap], axis=1).ravel()
    ys = np.concatenate([paths[:, :, 1], gap], axis=1).ravel()
    to_list = lambda a: [None if np.isnan(v) else float(v) for v in a]  # noqa: E731
    return to_list(xs), to_list(ys)


def _link_hover(d, why: str) -> list[str]:
    out = []
    for i, (a, b) in enumerate(d.ends):
        head = f"{TIER_NAMES[d.tier[i]]} link, node {a} - node {b}"
        if d.load is None:
            out.append(f"{head}<br>{why}")
        else:
            ab, ba = d.bytes_each_way[i]
            out.append(f"{head}<br>busiest way {d.load[i]:.0%} busy<br>"
                       f"{binary(ab)} one way, {binary(ba)} the other")  # fmt: skip
    return out
