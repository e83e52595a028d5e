"""ChipExplorer: compare chips and systems on chosen figures, with every figure's sources.

The view is thin: controls feed :class:`ChipComparison.set`, and :meth:`ChipExplorer.redraw`
reads the model's rows into a plotly FigureWidget inside ``batch_update``. Bad input shows a
message and keeps the last good view.
"""

from __future__ import annotations

import html

import ipywidgets as W
import plotly.graph_objects as go

from trnlab.units import si

from ._html import table
from ._style import base_layout, colour, symbol
from ._view import Dashboard
from .chip_model import METRICS, ChipComparison

__all__ = ["ChipExplorer"]


def _hover(row) -> str:
    if row.figure is None:
        return f"<b>{html.escape(row.name)}</b><br>no figure: {html.escape(row.reason[:160])}"
    lines = [f"<b>{html.escape(row.name)}</b>: {row.text}"]
    lines += [f"source: {html.escape(s.title[:70])}" for s in row.figure.sources[:3]]
    for label, v in row.others:
        lines.append(f"also published ({html.escape(label)}): {si(v, row.unit)}")
    return "<br>".join(lines)


class ChipExplorer(Dashboard):
    """Compare chips (or systems) on a chosen figure as bars, or two figures as a scatter.

    Parameters are those of :class:`~trnlab.widgets.chip_model.ChipComparison`.

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
            name="other published values",
            mode="markers",
            marker={"symbol": "diamond-open", "size": 12, "color": colour(3), "line": {"width": 2}},
            hoverinfo="text",
        )
        self.fig.add_scatter(
            name="chips", mode="markers+text", textposition="top center", hoverinfo="text"
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
            tooltip="x axis of the scatter",
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
        self._bind(self.level, self.items, self.metric, self.x_metric, self.chart)
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
        else:
            self.model.set(
                items=self.items.value,
                metric=self.metric.value,
                x_metric=self.x_metric.value,
                chart=self.chart.value,
            )

    def _sync_controls(self) -> None:
        self.items.options = self.model.options()
        self.items.value = self.model.items
        self.metric.options = self.x_metric.options = self.model.metrics()
        self.metric.value, self.x_metric.value = self.model.metric, self.model.x_metric
        self.x_metric.disabled = self.model.chart != "scatter"

    # Model -> picture -----------------------------------------------------------------------
    def redraw(self) -> None:
        m = self.model
        y = METRICS[m.metric]
        rows = m.rows()
        bar, alts, xy = self.fig.data
        with self.fig.batch_update():
            scatter = m.chart == "scatter"
            bar.visible = alts.visible = not scatter
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
                others = [(r.name, v, label) for r in rows for label, v in r.others]
                alts.x = [o[0] for o in others]
                alts.y = [o[1] for o in others]
                alts.hovertext = [f"{n}: {si(v, y.unit)} ({lab})" for n, v, lab in others]
                self.fig.layout.xaxis.title.text = ""
                self.fig.layout.xaxis.type = "category"
                self.fig.layout.yaxis.type = "linear"
            self.fig.layout.yaxis.title.text = f"{y.label} ({y.unit})"
            self.fig.layout.title.text = y.label + (" by " + m.level)
        self.summary.value = f"<p>{html.escape(m.summary())}</p>"
        self.table.value = _table_html(m.sources_table())


def _table_html(rows: list[dict[str, str]]) -> str:
    keys = ("item", "value", "sources", "note")
    return table(keys, ([r[k] for k in keys] for r in rows))
