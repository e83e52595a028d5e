"""The model behind ChipExplorer: which chips or systems, which figures, and what they say.

Plain Python over :mod:`trnlab.catalog` (no ipywidgets, no plotly), so it is tested without a
browser. The view only calls :meth:`ChipComparison.set` and reads :meth:`rows`,
:meth:`summary`, :meth:`sources_table` and :attr:`ChipComparison.notice`.

A row keeps apart what its sources say: the value trnlab uses, the sources that give each input
of a computed value (a system total cites the chip count and the per-chip figure separately,
since neither source states the total), the other values on record, and, for a system, the
totals its vendor published (:meth:`trnlab.catalog.System.compare`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trnlab import catalog
from trnlab._checks import choose, short
from trnlab.catalog import CatalogError, Chip, Figure, Source, System
from trnlab.units import si

from ._errors import SettingError
from .chip_metrics import (
    _ALSO_ON,
    GIB,
    METRICS,
    Cited,
    Item,
    Metric,
    _lower,
    _metric_of,
    value_text,
)

__all__ = ["METRICS", "ChipComparison", "Metric", "Other", "Row", "value_text"]


@dataclass(frozen=True)
class Other:
    """Another value on record for a row's figure.

    Attributes
    ----------
    label : str
        Who gives it ("article", "16 x cores x per-core (trnlab)", "published '9.8 TB/s'").
    value : float
    sources : tuple of Source
        The sources that state this value (or its inputs, for a computed one).
    published : bool
        True for a system total as a source printed it (:meth:`System.compare`).
    stated : str
        A published total as printed ("9.8 TB/s").
    agrees : bool or None
        For a published total: whether trnlab's computed total rounds to it; None where the
        total is of another format (an MXFP8 total on the FP8 chart).
    note : str
    """

    label: str
    value: float
    sources: tuple[Source, ...]
    published: bool = False
    stated: str = ""
    agrees: bool | None = None
    note: str = ""


@dataclass(frozen=True)
class Row:
    """One chip's (or system's) value of one metric, or the reason it has none."""

    key: str
    name: str
    value: float | None
    unit: str
    figure: Figure | None
    reason: str = ""
    cited: Cited = ()
    others: tuple[Other, ...] = ()

    @property
    def text(self) -> str:
        return value_text(self.value, self.unit) if self.value is not None else "n/a"

    @property
    def alternatives(self) -> list[Other]:
        """Other values of the figure on record (other sources, per-core figures)."""
        return [o for o in self.others if not o.published]

    @property
    def published(self) -> list[Other]:
        """The published totals of a system for this figure (:meth:`System.compare`)."""
        return [o for o in self.others if o.published]


def _read(m: Metric, item: Item) -> tuple[Figure, Cited, list[Other]]:
    """The figure of ``m`` for ``item``, its sources by role, and the other values on record."""
    if isinstance(item, System) and m.total and m.key not in item.figures:
        # A total: the catalogue's chips x per-chip figure. Neither source states the total,
        # so each is cited for what it gives; the chip's disputed values scale with it.
        chip_fig = m.get(item.chip)
        fig = item.figure(m.key)
        n = item.chips
        cited: Cited = (
            (f"chip count ({n})", _unique(item.figures["chips"].sources)),
            (f"per chip ({value_text(chip_fig.value, m.unit)})", _unique(chip_fig.sources)),
        )
        others = [
            Other(
                f"{n} x {a.label}" if n > 1 else a.label, n * float(a.value), a.sources, note=a.note
            )
            for a in chip_fig.alternatives
            if not a.used and isinstance(a.value, int | float)
        ]
        return fig, cited, others + _published(m, item)
    fig = m.get(item)
    if "cited" in fig.extra:
        cited = fig.extra["cited"]
    else:
        cited = ((("inputs (computed)" if fig.computed else ""), _unique(fig.sources)),)
    others = [
        Other(a.label, float(a.value), a.sources, note=a.note)
        for a in fig.alternatives
        if not a.used and isinstance(a.value, int | float)
    ]
    if isinstance(item, System):
        others += _published(m, item)
    return fig, cited, others


def _unique(sources: tuple[Source, ...]) -> tuple[Source, ...]:
    return tuple({s.key: s for s in sources}.values())


def _published(m: Metric, item: System) -> list[Other]:
    """The totals published for ``item`` that are values of ``m`` (or shown on its chart)."""
    out = []
    for c in item.compare():
        key = _metric_of(c.figure)
        srcs = item.published[c.figure].sources
        if key == m.key:
            label = f"published '{c.stated}'"
            out.append(Other(label, c.published, srcs, True, c.stated, c.agrees, c.note))
        elif key is not None and _ALSO_ON.get(key) == m.key:
            fmt, chip = key.split(".")[1].upper(), item.chip
            note = (
                f"the {fmt} rate ({item.chips} x {si(chip.figure(key).value, 'FLOP/s')}); plain "
                f"FP8 on {chip.name} runs at {si(m.get(chip).value, 'FLOP/s')} per chip"
            )
            label = f"published '{c.stated}' ({fmt})"
            out.append(Other(label, c.published, srcs, True, c.stated, None, note))
    return out


class ChipComparison:
    """State of a chip/system comparison: level, items, metric, x-metric and chart type.

    Parameters
    ----------
    level : {"chip", "system"}
    items : sequence of str, optional
        Catalogue keys; defaults to every chip (or every system).
    metric : str
        Key of :data:`METRICS` for the bars (or the y axis of the scatter).
    x_metric : str, optional
        Key of :data:`METRICS` for the scatter's x axis; default HBM bandwidth (in a scatter
        of HBM bandwidth itself, another figure: :attr:`notice` says which).
    chart : {"bar", "scatter"}

    Attributes
    ----------
    notice : str
        What the last :meth:`set` changed beyond what it was asked (a figure the new level
        lacks, an axis moved so that the scatter never draws a figure against itself); empty
        otherwise.
    """

    LEVELS = ("chip", "system")
    CHARTS = ("bar", "scatter")

    def __init__(
        self,
        level: str = "chip",
        items: Sequence[str] | None = None,
        metric: str = "peak.bf16",
        x_metric: str | None = None,
        chart: str = "bar",
    ) -> None:
        self.level, self.items, self.chart = "chip", (), "bar"
        self.metric, self.x_metric, self.notice = "peak.bf16", "hbm_bandwidth", ""
        given = {} if x_metric is None else {"x_metric": x_metric}
        self.set(level=level, items=items, metric=metric, chart=chart, **given)
        self.notice = ""  # nothing changed that the learner had chosen

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
        (a system total at chip level...) becomes another of the level's metrics, and
        :attr:`notice` says so. A scatter never draws a figure against itself: moving one
        axis onto the other's figure swaps them, and a level or chart change that would make
        them equal moves the x axis; :attr:`notice` says which.

        Raises
        ------
        SettingError
            For an unknown level, chart or metric, an item the level does not have, or a
            scatter asked for with the same figure on both axes; the state is left as it was.
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
        given = {}
        for name in ("metric", "x_metric"):
            if name not in changes:
                continue
            m = changes[name]
            key = m.strip().lower() if isinstance(m, str) else None
            if key in METRICS and key not in usable:
                raise SettingError(
                    f"{name} {m!r} is not available for {level}s; choose from {usable}"
                )
            given[name] = choose(m, usable, f"{name} for {level}s", SettingError)
        chart = choose(changes.get("chart", self.chart), self.CHARTS, "chart", SettingError)
        metric, x_metric, notes = self._axes(level, usable, chart, given)
        self.level, self.items, self.metric, self.x_metric, self.chart = (
            level,
            items,
            metric,
            x_metric,
            chart,
        )
        self.notice = " ".join(notes)
        return self

    def _axes(self, level, usable, chart, given) -> tuple[str, str, list[str]]:
        """The metric and x_metric after a change, never equal in a scatter, and notes on what
        moved that was not asked for."""
        metric = given.get("metric", self.metric)
        x_metric = given.get("x_metric", self.x_metric)
        notes = []

        def label(key: str) -> str:
            return METRICS[key].label

        def other_than(avoid: str, *prefer: str) -> str:
            return next(k for k in (*prefer, *usable) if k in usable and k != avoid)

        if metric not in usable:  # a figure the new level lacks
            new = other_than(x_metric if x_metric in usable else "", "peak.bf16")
            notes.append(f"{label(metric)} is not compared at {level} level; showing {label(new)}.")
            metric = new
        if x_metric not in usable:
            new = other_than(metric, "hbm_bandwidth")
            if chart == "scatter":
                notes.append(
                    f"The x axis ({label(x_metric)}) has no {level}-level figure; it now shows "
                    f"{label(new)}."
                )
            x_metric = new
        if chart != "scatter" or metric != x_metric:
            return metric, x_metric, notes
        if "metric" in given and "x_metric" in given:
            raise SettingError(
                f"a scatter of {_lower(label(metric))} against itself says nothing: choose an "
                f"x_metric other than the metric {metric!r}, such as {other_than(metric)!r}"
            )
        if "x_metric" in given:  # the x axis moved onto the y figure: swap the axes
            metric = other_than(x_metric, self.x_metric, "hbm_bandwidth")
            notes.append(
                f"{label(x_metric)} was the y axis, so the axes swapped: the y axis now shows "
                f"{label(metric)} (a figure plotted against itself says nothing)."
            )
        else:  # the y figure (or a level or chart change) met the x axis: the x axis moves
            was = x_metric
            x_metric = other_than(metric, self.metric, "hbm_bandwidth", "peak.bf16")
            notes.append(
                f"The x axis was {label(was)}, the figure on the y axis; it now shows "
                f"{label(x_metric)} (a figure plotted against itself says nothing)."
            )
        return metric, x_metric, notes

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
                fig, cited, others = _read(m, item)
                out.append(Row(key, name, float(fig.value), m.unit, fig, "", cited, tuple(others)))
            except CatalogError as err:
                out.append(Row(key, name, None, m.unit, None, reason=str(err)))
        return out

    def summary(self) -> str:
        """A few sentences of numbers saying what the chart shows."""
        m = METRICS[self.metric]
        rows = self.rows()
        have = [r for r in rows if r.value is not None]
        if not have:
            return f"No {self.level} in the selection has a figure for {_lower(m.label)}."
        hi = max(have, key=lambda r: r.value)
        lo = min(have, key=lambda r: r.value)
        parts = [f"{m.label}: highest {hi.name} ({hi.text}), lowest {lo.name} ({lo.text})"]
        if hi is not lo and lo.value > 0:
            parts[0] += f", a {hi.value / lo.value:.1f}x spread."
        else:
            parts[0] += "."
        parts += self._caveats(m, have)
        disputed = [r for r in have if r.alternatives]
        if disputed:
            names = ", ".join(r.name for r in disputed)
            parts.append(
                f"Other values are on record for {names} (published by other sources, or "
                f"derived from per-core figures): bars show the value trnlab uses, hollow "
                f"diamonds the others; hover for their sources."
            )
        parts += _published_summary(have)
        missing = [r.name for r in rows if r.value is None]
        if missing:
            parts.append(f"No figure on record for {', '.join(missing)}.")
        if self.chart == "scatter":
            x = METRICS[self.x_metric]
            xs = {r.key: r.value for r in self.rows(self.x_metric)}
            both = sum(1 for r in have if xs[r.key])
            parts.append(
                f"Scatter: {_lower(m.label)} against {_lower(x.label)}, {both} of {len(rows)} "
                f"items with both figures."
            )
        return " ".join(parts)

    def _caveats(self, m: Metric, have: list[Row]) -> list[str]:
        """What the metric's numbers mean, in the selection's own figures."""
        out = [m.note] if m.note else []
        items = [self._item(r.key) for r in have]
        chips = {i.key: i for i in items if isinstance(i, Chip)}
        chips.update({i.chip.key: i.chip for i in items if isinstance(i, System)})
        if m.key == "peak.fp8":
            systems = [i for i in items if isinstance(i, System)]
            out += [t for c in chips.values() if (t := _mx_faster(c, systems))]
        elif m.key == "intensity.bf16":
            # The MatmulStepper's roofline (trnlab.core.Run.roofline): a core's peak over the
            # core's DMA bandwidth.
            stepper = [
                f"{c.name} {c.core.peak_flops('bf16') / c.core.dma_bandwidth:,.0f}"
                for c in chips.values()
                if c.core is not None and "bf16" in c.core.tensor_rate
            ]
            if stepper:
                out.append(
                    "The MatmulStepper's ridge for a BF16 kernel (per NeuronCore: core peak / "
                    f"the core's DMA bandwidth): {', '.join(stepper)} FLOP/B."
                )
        elif m.key == "hbm_bytes":
            decimal = [r for r in have if r.value % GIB]
            if decimal:
                r = decimal[0]
                out.append(
                    f"Some capacities are stated in decimal GB ({r.name}: "
                    f"{si(r.value, 'B', binary_bytes=False)} is {si(r.value, 'B')}), others in "
                    f"GiB, so each value shows both (1 GiB = 1.074 GB)."
                )
        elif m.key == "link_bandwidth":
            out.append(_link_caveat(have))
        return out

    def sources_table(self) -> list[dict[str, str]]:
        """One entry per item: value, sources (each with what it gives), and the other values
        on record: alternatives and, for a system, its published totals."""
        table = []
        for r in self.rows():
            if r.figure is None:
                table.append({"item": r.name, "value": "n/a", "sources": "", "note": r.reason})
                continue
            srcs = " | ".join(
                (f"{role} from " if role else "") + "; ".join(f"{s.key}: {s.title}" for s in group)
                for role, group in r.cited
            )
            note = r.figure.why if (r.figure.computed or r.alternatives) else r.figure.note
            if r.alternatives:
                others = ", ".join(
                    f"{o.label} {value_text(o.value, r.unit)}" for o in r.alternatives
                )
                note = f"other values: {others}. {note}"
            for o in r.published:
                verdict = {True: "agrees", False: "disagrees", None: "another format"}[o.agrees]
                keys = ", ".join(s.key for s in o.sources)
                why = f": {o.note}" if o.note else ""
                note += f" Published total '{o.stated}' [{keys}], {verdict}{why}."
            table.append({"item": r.name, "value": r.text, "sources": srcs, "note": note.strip()})
        return table


def _published_summary(have: list[Row]) -> list[str]:
    """Sentences on the published system totals: which agree, which do not, which are of
    another format."""
    pub = [(r, o) for r in have for o in r.published]
    if not pub:
        return []
    agree = list(dict.fromkeys(r.name for r, o in pub if o.agrees))
    differ = [f"{r.name} '{o.stated}' against {r.text}" for r, o in pub if o.agrees is False]
    other = [f"{r.name} '{o.stated}'" for r, o in pub if o.agrees is None]
    out = ["Stars mark the totals sources published for the systems (hover for which)."]
    if agree:
        out.append(
            f"Those of {', '.join(agree)} agree with chips x per-chip figure within their "
            f"printed rounding."
        )
    if differ:
        out.append(f"Published totals that disagree with it: {'; '.join(differ)}.")
    if other:
        out.append(f"Stars of another format ({'; '.join(other)}) are MX totals, not plain FP8.")
    return out


def _mx_faster(chip: Chip, systems: Sequence[System] = ()) -> str:
    """A sentence for a chip whose MX formats run faster than plain FP8 (else ""), with the
    MXFP8 totals of the ``systems`` built from it."""
    if chip.mx_gain_over_fp8() is None:
        return ""
    fp8, mx, bf16 = (chip.peak_flops(d) for d in ("fp8", "mxfp8", "bf16"))
    per_core = ""
    if chip.core is not None and "mxfp8" in chip.core.tensor_rate:
        rates = chip.core.tensor_rate
        per_core = f", {rates['mxfp8'].value / rates['bf16'].value:g}x BF16 per NeuronCore"
    same = " (its BF16 rate)" if fp8 == bf16 else ""
    totals = [f"{s.name} {si(s.peak_flops('mxfp8'), 'FLOP/s')}" for s in systems if s.chip == chip]
    in_systems = f"; in MXFP8, {', '.join(totals)}" if totals else ""
    return (
        f"On {chip.name} plain FP8 runs at {si(fp8, 'FLOP/s')} per chip{same}; its fast 8-bit "
        f"rate, {si(mx, 'FLOP/s')} per chip{per_core}, is for the MX formats (MXFP8, "
        f"MXFP4){in_systems}: choose Dense MXFP8 peak to compare it."
    )


def _link_caveat(have: list[Row]) -> str:
    """The direction convention of link figures, and how trnlab's fabric model reads them."""
    from trnlab.fabric import FabricParams

    nvlink = [f"{r.name}: {r.figure.note}" for r in have if "NVLink" in r.figure.note]
    both = FabricParams().counts_both_directions
    return (
        "NVIDIA counts NVLink bandwidth over both directions"
        + (f" ({'; '.join(nvlink)})" if nvlink else "")
        + "; the Neuron docs do not say whether their NeuronLink figures do. If they are per "
        "direction, a Neuron bar is half of what NVLink's convention would give. trnlab's "
        f"fabric model reads them as {'both directions' if both else 'per direction'} (an "
        f"assumption: trnlab.fabric.FabricParams(counts_both_directions={both}))."
    )
