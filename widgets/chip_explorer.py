"""ChipExplorer: compare chips and systems on chosen figures, with every figure's sources.

The view is thin: controls feed :class:`ChipComparison.set`, and :meth:`ChipExplorer.redraw`
reads the model's rows into a plotly FigureWidget inside ``batch_update``. Bad input shows a
message and keeps the last good view.
"""

from __future__ import annotations

import html

import ipywidgets as W
import plotly.graph_objects as go

from ._html import table
from ._style import base_layout, colour, symbol
from ._view import Dashboard
from .chip_model import METRICS, ChipComparison, value_text

__all__ = ["ChipExplorer"]


def _hover(row) -> str:
    if row.figure is None:
        return f"<b>{html.escape(row.name)}</b><br>no figure: {html.escape(row.reason[:160])}"
    lines = [f"<b>{html.escape(row.name)}</b>: {html.escape(row.text)}"]
    for role, sources in row.cited[:3]:
        titles = "; ".join(html.escape(s.title[:60]) for s in sources[:2])
        lines.append(f"{html.escape(role)} from {titles}" if role else f"source: {titles}")
    if row.figure.note and not row.figure.computed:
        lines.append(f"note: {html.escape(row.figure.note[:100])}")
    for o in row.alternatives:
        lines.append(f"also on record ({html.escape(o.label)}): {value_text(o.value, row.unit)}")
    for o in row.published:
        lines.append(f"published total '{html.escape(o.stated)}' ({html.escape(_verdict(o))})")
    return "<br>".join(lines)


def _verdict(o) -> str:
    if o.agrees is None:
        return o.note[:120]
    return "agrees with chips x per-chip figure" if o.agrees else "disagrees with chips x per-chip"


class ChipExplorer(Dashboard):
    """Compare chips (or systems) on a chosen figure as bars, or two figures as a scatter.

    Parameters are those of :class:`~trnlab.widgets.chip_model.ChipComparison`. Bars show the
    value trnlab uses; hollow diamonds the other values on record; stars the totals published
    for a system. A setting the model refuses shows as a message and the last good view stays;
    a change that moved something else (an axis, a figure the new level lacks) says so there.

    Examples
    --------
    >>> from trnlab.widgets import ChipExplorer
    >>> ChipExplorer(metric="peak.fp8")  # doctest: +SKIP
    """

    def __init__(self, **settings) -> None:
        super().__init__()
        self.model = ChipComparison(**settings)
        self.fig = go.FigureWidget(layout=base_layout(height=440))
        self.fig.add_bar(name="value trnlab uses", marker={"color": colour(0)}, hoverinfo="text")
        self.fig.add_scatter(
            name="other values on record",
            mode="markers",
            marker={"symbol": "diamond-open", "size": 12, "color": colour(3), "line": {"width": 2}},
            hoverinfo="text",
        )
        self.fig.add_scatter(
            name="chips", mode="markers+text", textposition="top center", hoverinfo="text"
        )
        self.fig.add_scatter(
            name="published system total",
            mode="markers",
            marker={"symbol": "star", "size": 14, "color": colour(7), "line": {"width": 1}},
            hoverinfo="text",
        )
        opts = dict(style={"description_width": "initial"})
        self.level = W.ToggleButtons(
            options=[("Chips", "chip"), ("Systems", "system")],
            value=self.model.level,
            description="Compare",
            tooltip="compare single chips, or whole systems built from them",
            tooltips=["one accelerator", "instances and UltraServers"],
            **opts,
        )
        self.items = W.SelectMultiple(
            options=self.model.options(),
            value=self.model.items,
            rows=8,
            description="Items",
            tooltip="Ctrl/Cmd-click to choose several",
            **opts,
        )
        self.metric = W.Dropdown(
            options=self.model.metrics(),
            value=self.model.metric,
            description="Figure",
            tooltip="the figure to compare (y axis)",
            **opts,
        )
        self.x_metric = W.Dropdown(
            options=self.model.metrics(),
            value=self.model.x_metric,
            description="x axis",
            tooltip="x axis of the scatter (never the same figure as the y axis)",
            **opts,
        )
        self.chart = W.ToggleButtons(
            options=[("Bars", "bar"), ("Scatter", "scatter")],
            value=self.model.chart,
            description="Chart",
            tooltip="bars for one figure, or a scatter of two figures",
            tooltips=["one figure per item", "two figures against each other"],
            **opts,
        )
        self.summary = W.HTML()
        self.table = W.HTML()
        self._controls = {
            "items": self.items,
            "metric": self.metric,
            "x_metric": self.x_metric,
            "chart": self.chart,
        }
        self._bind(self.level, *self._controls.values())
        self.widget = W.VBox(
            [
                W.HBox([W.VBox([self.level, self.chart, self.metric, self.x_metric]), self.items]),
                self.message,
                self.fig,
                self.summary,
                W.Accordion(children=[self.table], titles=("Sources of every value",)),
            ]
        )
        self.redraw()

    # Controls -> model ----------------------------------------------------------------------
    def _apply(self, change) -> None:
        if change["owner"] is self.level:
            self.model.set(level=self.level.value, items=None)
            return
        name = next(k for k, w in self._controls.items() if w is change["owner"])
        self.model.set(**{name: change["owner"].value})  # only what the learner changed

    def _sync_controls(self) -> None:
        self.level.value = self.model.level
        self.items.options = self.model.options()
        self.items.value = self.model.items
        self.metric.options = self.x_metric.options = self.model.metrics()
        self.metric.value, self.x_metric.value = self.model.metric, self.model.x_metric
        self.chart.value = self.model.chart
        self.x_metric.disabled = self.model.chart != "scatter"

    # Model -> picture -----------------------------------------------------------------------
    def redraw(self) -> None:
        m = self.model
        y = METRICS[m.metric]
        rows = m.rows()
        summary, table = m.summary(), _table_html(m.sources_table())
        bar, alts, xy, pub = self.fig.data
        with self.fig.batch_update():
            scatter = m.chart == "scatter"
            bar.visible = alts.visible = pub.visible = not scatter
            xy.visible = scatter
            if scatter:
                x = METRICS[m.x_metric]
                xs = {r.key: r for r in m.rows(m.x_metric)}
                pts = [(xs[r.key], r) for r in rows if r.value is not None and xs[r.key].value]
                xy.x = [a.value for a, _ in pts]
                xy.y = [b.value for _, b in pts]
                xy.text = [b.name for _, b in pts]
                xy.hovertext = [f"{_hover(b)}<br>{x.label}: {a.text}" for a, b in pts]
                # Property by property: a whole new marker object trips plotly.js's restyle.
                xy.marker.size = 13
                xy.marker.color = [colour(i) for i in range(len(pts))]
                xy.marker.symbol = [symbol(i) for i in range(len(pts))]
                self.fig.layout.xaxis.title.text = f"{x.label} ({x.unit})"
                self.fig.layout.xaxis.type = "log"
                self.fig.layout.yaxis.type = "log"
            else:
                bar.x = [r.name for r in rows]
                bar.y = [r.value if r.value is not None else 0 for r in rows]
                bar.hovertext = [_hover(r) for r in rows]
                bar.text = [r.text for r in rows]
                bar.textposition = "outside"
                for trace, kind in ((alts, "alternatives"), (pub, "published")):
                    marks = [(r, o) for r in rows for o in getattr(r, kind)]
                    trace.x = [r.name for r, _ in marks]
                    trace.y = [o.value for _, o in marks]
                    trace.hovertext = [
                        f"{html.escape(r.name)}: {value_text(o.value, y.unit)} "
                        f"({html.escape(o.label)})<br>{html.escape(o.note[:160])}"
                        for r, o in marks
                    ]
                    trace.showlegend = bool(marks)  # no legend entry for what is not drawn
                self.fig.layout.xaxis.title.text = ""
                self.fig.layout.xaxis.type = "category"
                self.fig.layout.yaxis.type = "linear"
            self.fig.layout.yaxis.title.text = f"{y.label} ({y.unit})"
            self.fig.layout.title.text = y.label + (" by " + m.level)
        self.summary.value = f"<p>{html.escape(summary)}</p>"
        self.table.value = table
        if m.notice:  # what the last change moved beyond what was asked
            self.message.value = (
                f'<span style="color:#0072B2">&#9432; {html.escape(m.notice)}</span>'
            )
        elif "9432" in self.message.value:
            self.message.value = ""


def _table_html(rows: list[dict[str, str]]) -> str:
    keys = ("item", "value", "sources", "note")
    return table(keys, ([r[k] for k in keys] for r in rows))
