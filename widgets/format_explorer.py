"""FormatExplorer: numeric formats side by side on one data set; error against throughput.

Left: the data's magnitudes (log2 |x| histogram) with each format's representable values as
ticks below it, one row per format named at its left end (not told apart by colour alone), so
you see where a format has resolution and where it clips or flushes.
Right: matmul accuracy (SNR) against the chosen chip's peak for each format. Below: a table
and a text summary. The model is :class:`~trnlab.widgets.format_model.FormatComparison`.
"""

from __future__ import annotations

import html

import ipywidgets as W
import numpy as np
import plotly.graph_objects as go

from trnlab import catalog, formats
from trnlab.units import si

from ._html import table
from ._style import base_layout, colour, symbol
from ._view import Dashboard
from .format_model import BLOCK_SIZES, MAX_FORMATS, FormatComparison

__all__ = ["FormatExplorer"]


class FormatExplorer(Dashboard):
    """Compare numeric formats: value grids over the data, error, bits and throughput.

    Parameters are those of :class:`~trnlab.widgets.format_model.FormatComparison`.
    """

    def __init__(self, **settings) -> None:
        super().__init__()
        self.model = FormatComparison(**settings)
        self.hist = go.FigureWidget(layout=base_layout("Data magnitudes and format grids", 400))
        self.hist.add_bar(name="data", marker={"color": "#BBBBBB"}, hoverinfo="x+y")
        for i in range(MAX_FORMATS):
            self.hist.add_scatter(
                mode="markers",
                marker={
                    "symbol": "line-ns-open",
                    "size": 11,
                    "color": colour(i),
                    "line": {"width": 2},
                },
                hoverinfo="text",
                visible=False,
                showlegend=False,  # each row is named on the chart instead
            )
        self.hist.update_layout(
            xaxis_title="log2 |value|", yaxis_title="count", bargap=0, margin={"l": 100}
        )
        self.trade = go.FigureWidget(layout=base_layout("Accuracy against throughput", 400))
        for i in range(MAX_FORMATS):
            self.trade.add_scatter(
                mode="markers+text",
                textposition="top center",
                marker={"symbol": symbol(i), "size": 14, "color": colour(i)},
                hoverinfo="text",
                visible=False,
            )
        self.trade.update_layout(
            xaxis_title="peak on chip (FLOP/s, log)",
            xaxis_type="log",
            yaxis_title="matmul SNR (dB)",
        )
        style = {"description_width": "initial"}
        m = self.model
        self.formats = W.SelectMultiple(
            options=m.available_formats(),
            value=m.formats,
            rows=9,
            description="Formats",
            tooltip=f"Ctrl/Cmd-click: up to {MAX_FORMATS}",
            style=style,
        )
        self.distribution = W.Dropdown(
            options=[(f"{k}: {v}", k) for k, v in formats.DISTRIBUTIONS.items()],
            value=m.distribution,
            description="Data",
            tooltip="what the values look like",
            style=style,
            layout={"width": "420px"},
        )
        self.rounding = W.ToggleButtons(
            options=["nearest", "stochastic"],
            value=m.rounding,
            description="Rounding",
            tooltip="how a value between two representable ones is rounded",
            tooltips=["round to nearest, ties to even", "round up with probability = fraction"],
            style=style,
        )
        self.block_size = W.Dropdown(
            options=BLOCK_SIZES,
            value=m.block_size,
            description="MX block",
            tooltip="values sharing one power-of-two scale (OCP: 32)",
            style=style,
        )
        self.chip = W.Dropdown(
            options=m.available_chips(),
            value=m.chip,
            description="Chip",
            tooltip="whose peak per format is shown",
            style=style,
        )
        self.sparse = W.Checkbox(
            value=m.sparse,
            description="N:M sparse peak",
            tooltip="use the chip's peak with N:M structured sparsity (e.g. 2:4) as throughput",
            indent=False,
        )
        self.summary = W.HTML()
        self.table = W.HTML()
        self._bind(
            self.formats, self.distribution, self.rounding, self.block_size, self.chip, self.sparse
        )
        controls = W.VBox(
            [self.distribution, self.rounding, self.block_size, self.chip, self.sparse]
        )
        self.widget = W.VBox(
            [
                W.HBox([controls, self.formats]),
                self.message,
                W.HBox([self.hist, self.trade]),
                self.summary,
                self.table,
            ]
        )
        self.redraw()

    # Controls -> model ----------------------------------------------------------------------
    def _apply(self, change) -> None:
        self.model.set(
            formats=self.formats.value,
            distribution=self.distribution.value,
            rounding=self.rounding.value,
            block_size=self.block_size.value,
            chip=self.chip.value,
            sparse=self.sparse.value,
        )

    def _sync_controls(self) -> None:
        m = self.model
        self.formats.value = m.formats
        self.distribution.value, self.rounding.value = m.distribution, m.rounding
        self.block_size.value, self.chip.value, self.sparse.value = m.block_size, m.chip, m.sparse

    # Model -> picture -----------------------------------------------------------------------
    def redraw(self) -> None:
        m = self.model
        rows = m.rows()
        edges, counts = m.histogram()
        centres = (edges[:-1] + edges[1:]) / 2
        tick_gap = max(1, int(counts.max()) // 12)
        with self.hist.batch_update():
            self.hist.data[0].x, self.hist.data[0].y = centres, counts
            for i, trace in enumerate(self.hist.data[1:]):
                if i < len(rows):
                    grid = m.grid(rows[i].fmt)
                    trace.x = grid
                    trace.y = [-(i + 1) * tick_gap] * len(grid)
                    trace.name = rows[i].fmt
                    trace.hovertext = [f"{rows[i].fmt}: 2^{v:.2f} = {2.0**v:.4g}" for v in grid]
                    trace.visible = True
                else:
                    trace.visible = False
            self.hist.layout.annotations = [
                {"text": r.fmt, "xref": "paper", "x": 0, "xanchor": "right", "yref": "y",
                 "y": -(i + 1) * tick_gap, "showarrow": False, "font": {"size": 11}}
                for i, r in enumerate(rows[: MAX_FORMATS])
            ]  # fmt: skip
        with self.trade.batch_update():
            for i, trace in enumerate(self.trade.data):
                r = rows[i] if i < len(rows) else None
                drawn = bool(r and r.throughput and np.isfinite(r.matmul_snr_db))
                trace.visible = drawn
                if drawn:
                    trace.x, trace.y = [r.throughput], [r.matmul_snr_db]
                    trace.text, trace.name = [r.fmt], r.fmt
                    trace.hovertext = [
                        f"<b>{r.fmt}</b><br>{r.bits_per_value:g} bits/value<br>"
                        f"SNR {r.matmul_snr_db:.1f} dB<br>{si(r.throughput, 'FLOP/s')}"
                    ]
            overflowed = [r.fmt for r in rows if not np.isfinite(r.matmul_snr_db)]
            chip = catalog.chip(m.chip).name
            self.trade.layout.title.text = f"Accuracy against throughput on {chip}" + (
                f"<br><sup>not drawn: {', '.join(overflowed)} (the matmul overflowed)</sup>"
                if overflowed
                else ""
            )
        self.summary.value = f"<p>{html.escape(m.summary())}</p>"
        self.table.value = _table(rows)


def _table(rows) -> str:
    head = (
        "format",
        "bits/value",
        "RMS error",
        "clipped",
        "to zero",
        "Inf/NaN",
        "matmul SNR",
        "peak",
    )
    return table(
        head,
        (
            (
                r.fmt,
                f"{r.bits_per_value:g}",
                f"{r.rms_rel_error:.2%}" + (" (finite values)" if r.non_finite > 0 else ""),
                f"{r.clipped:.2%}",
                f"{r.flushed_to_zero:.2%}",
                f"{r.non_finite:.2%}",
                f"{r.matmul_snr_db:.1f} dB" if np.isfinite(r.matmul_snr_db) else "overflowed",
                si(r.throughput, "FLOP/s") if r.throughput else "n/a",
            )
            for r in rows
        ),
    )
