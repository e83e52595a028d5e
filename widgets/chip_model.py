"""The model behind ChipExplorer: which chips or systems, which figures, and what they say.

Plain Python over :mod:`trnlab.catalog` (no ipywidgets, no plotly), so it is tested without a
browser. The view only calls :meth:`ChipComparison.set` and reads :meth:`rows`,
:meth:`summary` and :meth:`sources_table`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from trnlab import catalog
from trnlab._checks import choose, short
from trnlab.catalog import CatalogError, Chip, Figure, System
from trnlab.units import si

from ._errors import SettingError

__all__ = ["METRICS", "ChipComparison", "Metric", "Row"]

Item = Chip | System


@dataclass(frozen=True)
class Metric:
    """A figure that can be compared across chips or systems."""

    key: str
    label: str
    unit: str
    levels: tuple[str, ...]
    get: Callable[[Item], Figure]


def _fig(name: str) -> Callable[[Item], Figure]:
    return lambda item: item.figure(name)


def _link(item: Item) -> Figure:
    for name in ("neuronlink_bandwidth", "interconnect_bandwidth"):
        if name in item.figures:
            return item.figures[name]
    raise CatalogError(f"{item}: no chip-to-chip bandwidth on record")


def _intensity(item: Item) -> Figure:
    # Roofline ridge point: peak FLOP/s over HBM B/s (Williams, Waterman & Patterson, 2009).
    peak, bw = item.figure("peak.bf16"), item.figure("hbm_bandwidth")
    return Figure(
        name=f"{item.key}.intensity.bf16",
        value=peak.value / bw.value,
        unit="FLOP/B",
        sources=peak.sources + bw.sources,
        why=f"{si(peak.value, 'FLOP/s')} / {si(bw.value, 'B/s')}",
        computed=True,
    )


def _network(item: Item) -> Figure:
    if not isinstance(item, System) or item.network_bandwidth is None:
        raise CatalogError(f"{item}: no scale-out network figure on record")
    if "network" in item.figures:
        return item.figures["network"]
    src = item.figures.get("efa_per_chip") or item.figures["chips"]
    return Figure(
        name=f"{item.key}.network",
        value=item.network_bandwidth,
        unit="bit/s",
        sources=src.sources,
        why="summed over the system's chips or instances",
        computed=True,
    )


_M = [
    Metric("peak.bf16", "Dense BF16 peak", "FLOP/s", ("chip", "system"), _fig("peak.bf16")),
    Metric("peak.fp8", "Dense FP8 peak", "FLOP/s", ("chip", "system"), _fig("peak.fp8")),
    Metric("peak.mxfp4", "Dense MXFP4 peak", "FLOP/s", ("chip", "system"), _fig("peak.mxfp4")),
    Metric("peak.fp32", "Dense FP32 peak", "FLOP/s", ("chip", "system"), _fig("peak.fp32")),
    Metric(
        "peak_sparse.bf16",
        "Sparse BF16 peak (best N:M)",
        "FLOP/s",
        ("chip", "system"),
        _fig("peak_sparse.bf16"),
    ),
    Metric("hbm_bytes", "HBM capacity", "B", ("chip", "system"), _fig("hbm_bytes")),
    Metric("hbm_bandwidth", "HBM bandwidth", "B/s", ("chip", "system"), _fig("hbm_bandwidth")),
    Metric(
        "intensity.bf16", "Ridge point (BF16 peak / HBM bandwidth)", "FLOP/B", ("chip",), _intensity
    ),
    Metric("sbuf_bytes", "On-chip SBUF", "B", ("chip",), _fig("sbuf_bytes")),
    Metric("link_bandwidth", "Chip-to-chip link bandwidth", "B/s", ("chip",), _link),
    Metric("power", "Power per chip", "W", ("chip",), _fig("power")),
    Metric("chips", "Chips", "chips", ("system",), _fig("chips")),
    Metric("network", "Scale-out network (EFA)", "bit/s", ("system",), _network),
    Metric("price_per_hour", "On-demand price", "USD/h", ("system",), _fig("price_per_hour")),
]
METRICS: dict[str, Metric] = {m.key: m for m in _M}


@dataclass(frozen=True)
class Row:
    """One chip's (or system's) value of one metric, or the reason it has none."""

    key: str
    name: str
    value: float | None
    unit: str
    figure: Figure | None
    reason: str = ""

    @property
    def text(self) -> str:
        return si(self.value, self.unit) if self.value is not None else "n/a"

    @property
    def others(self) -> list[tuple[str, float]]:
        """Other values on record for a disputed figure: (label, value)."""
        if self.figure is None:
            return []
        return [(a.label, float(a.value)) for a in self.figure.alternatives if not a.used]


class ChipComparison:
    """State of a chip/system comparison: level, items, metric, x-metric and chart type.

    Parameters
    ----------
    level : {"chip", "system"}
    items : sequence of str, optional
        Catalogue keys; defaults to every chip (or every system).
    metric : str
        Key of :data:`METRICS` for the bars (or the y axis of the scatter).
    x_metric : str
        Key of :data:`METRICS` for the scatter's x axis.
    chart : {"bar", "scatter"}
    """

    LEVELS = ("chip", "system")
    CHARTS = ("bar", "scatter")

    def __init__(
        self,
        level: str = "chip",
        items: Sequence[str] | None = None,
        metric: str = "peak.bf16",
        x_metric: str = "hbm_bandwidth",
        chart: str = "bar",
    ) -> None:
        self.level, self.items, self.metric, self.x_metric, self.chart = "chip", (), "", "", "bar"
        self.set(level=level, items=items, metric=metric, x_metric=x_metric, chart=chart)

    # State ----------------------------------------------------------------------------------
    def options(self, level: str | None = None) -> list[tuple[str, str]]:
        """(label, key) pairs of what can be compared at ``level``."""
        level = self._level(level)
        pool = catalog.chips() if level == "chip" else catalog.systems()
        return [(getattr(x, "name", x.key), x.key) for x in pool]

    def metrics(self, level: str | None = None) -> list[tuple[str, str]]:
        """(label, key) pairs of the metrics available at ``level``."""
        level = self._level(level)
        return [(m.label, m.key) for m in METRICS.values() if level in m.levels]

    def _level(self, level) -> str:
        return self.level if level is None else choose(level, self.LEVELS, "level", SettingError)

    def set(self, **changes) -> ChipComparison:
        """Change any of level, items, metric, x_metric, chart; all-or-nothing.

        Names are case-insensitive. ``items=None`` (or empty) means every chip (or system) of
        the level. Switching the level keeps the metrics the new level has; one it lacks
        (a system total at chip level...) becomes the level's first metric, unless given.

        Raises
        ------
        SettingError
            For an unknown level, chart or metric, or an item the level does not have; the
            state is left as it was.
        """
        unknown = set(changes) - {"level", "items", "metric", "x_metric", "chart"}
        if unknown:
            raise SettingError(
                f"ChipComparison has no setting {sorted(unknown)}; use level, items, metric, "
                f"x_metric or chart"
            )
        level = choose(changes.get("level", self.level), self.LEVELS, "level", SettingError)
        valid = [k for _, k in self.options(level)]
        items = changes.get("items", self.items if level == self.level else None)
        if items is not None and (isinstance(items, str) or not isinstance(items, list | tuple)):
            raise SettingError(
                f"items is a list of catalogue keys such as ['trn2', 'h100'] (or None for all), "
                f"not {short(items)}"
            )
        names = {**{k: k for k in valid}, **{label.lower(): k for label, k in self.options(level)}}
        items = (
            tuple(valid)
            if not items
            else tuple(choose(i, valid, f"{level} (items)", SettingError, names) for i in items)
        )
        if len(set(items)) != len(items):
            raise SettingError(f"items lists an item twice: {list(items)}; name each once")
        usable = [k for _, k in self.metrics(level)]
        metric = changes.get("metric", self.metric)
        x_metric = changes.get("x_metric", self.x_metric)
        if "metric" not in changes and metric not in usable:
            metric = usable[0]
        if "x_metric" not in changes and x_metric not in usable:
            x_metric = "hbm_bandwidth"
        for name, m in (("metric", metric), ("x_metric", x_metric)):
            key = m.strip().lower() if isinstance(m, str) else None
            if key in METRICS and key not in usable:
                raise SettingError(
                    f"{name} {m!r} is not available for {level}s; choose from {usable}"
                )
        metric = choose(metric, usable, f"metric for {level}s", SettingError)
        x_metric = choose(x_metric, usable, f"x_metric for {level}s", SettingError)
        chart = choose(changes.get("chart", self.chart), self.CHARTS, "chart", SettingError)
        self.level, self.items, self.metric, self.x_metric, self.chart = (
            level,
            items,
            metric,
            x_metric,
            chart,
        )
        return self

    # Results --------------------------------------------------------------------------------
    def _item(self, key: str) -> Item:
        return catalog.chip(key) if self.level == "chip" else catalog.system(key)

    def rows(self, metric: str | None = None) -> list[Row]:
        """The chosen items' values of ``metric`` (default: the current metric)."""
        m = METRICS[
            self.metric if metric is None else choose(metric, METRICS, "metric", SettingError)
        ]
        out = []
        for key in self.items:
            item = self._item(key)
            name = item.name + (" (target)" if getattr(item, "status", "") == "announced" else "")
            try:
                fig = m.get(item)
                out.append(Row(key, name, float(fig.value), m.unit, fig))
            except CatalogError as err:
                out.append(Row(key, name, None, m.unit, None, reason=str(err)))
        return out

    def summary(self) -> str:
        """A few sentences of numbers saying what the chart shows."""
        m = METRICS[self.metric]
        rows = self.rows()
        have = [r for r in rows if r.value is not None]
        if not have:
            return f"No {self.level} in the selection has a figure for {m.label.lower()}."
        hi = max(have, key=lambda r: r.value)
        lo = min(have, key=lambda r: r.value)
        parts = [f"{m.label}: highest {hi.name} ({hi.text}), lowest {lo.name} ({lo.text})"]
        if hi is not lo and lo.value > 0:
            parts[0] += f", a {hi.value / lo.value:.1f}x spread."
        else:
            parts[0] += "."
        disputed = [r for r in have if r.others]
        if disputed:
            names = ", ".join(r.name for r in disputed)
            parts.append(
                f"Other values are on record for {names} (published by other sources, or "
                f"derived from per-core figures): bars show the value trnlab uses, hollow "
                f"diamonds the others; hover for their sources."
            )
        missing = [r.name for r in rows if r.value is None]
        if missing:
            parts.append(f"No figure on record for {', '.join(missing)}.")
        if self.chart == "scatter":
            x = METRICS[self.x_metric]
            parts.append(f"Scatter: {m.label.lower()} against {x.label.lower()}.")
        return " ".join(parts)

    def sources_table(self) -> list[dict[str, str]]:
        """One entry per item: value, sources, and the alternatives when disputed."""
        table = []
        for r in self.rows():
            if r.figure is None:
                table.append({"item": r.name, "value": "n/a", "sources": "", "note": r.reason})
                continue
            srcs = "; ".join(f"{s.key}: {s.title}" for s in r.figure.sources)
            note = r.figure.why if (r.figure.computed or r.others) else r.figure.note
            if r.others:
                note = (
                    "other values: "
                    + ", ".join(f"{label} {si(v, r.unit)}" for label, v in r.others)
                    + f". {note}"
                )
            table.append({"item": r.name, "value": r.text, "sources": srcs, "note": note})
        return table
