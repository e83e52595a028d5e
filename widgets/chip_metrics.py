"""The figures ChipExplorer compares: what each one is, how it is read from the catalogue, and
how its values are written (:data:`METRICS`).

Each :class:`Metric` names a figure of a chip or a system, its unit, the levels it exists at,
and the function that reads it (a catalogue figure, or one computed from several, such as the
ridge point or a system's scale-out network), with a note for its caveats.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from trnlab.catalog import CatalogError, Chip, Figure, Source, System
from trnlab.units import si

__all__ = ["METRICS", "Metric", "value_text"]

Item = Chip | System
#: Sources grouped by what they give: ("", sources) states the value itself; ("chip count
#: (16)", sources) gives one input of a computed value.
Cited = tuple[tuple[str, tuple[Source, ...]], ...]
GIB = 2**30


@dataclass(frozen=True)
class Metric:
    """A figure that can be compared across chips or systems.

    ``total``: at system level the figure is the chip count times the chip's figure, so the
    chip's other values on record scale with it. ``note``: what a reader must know to compare
    the figure fairly (said in the summary).
    """

    key: str
    label: str
    unit: str
    levels: tuple[str, ...]
    get: Callable[[Item], Figure]
    total: bool = False
    note: str = ""


def _fig(name: str) -> Callable[[Item], Figure]:
    return lambda item: item.figure(name)


def _link(item: Item) -> Figure:
    for name in ("neuronlink_bandwidth", "interconnect_bandwidth"):
        if name in item.figures:
            return item.figures[name]
    raise CatalogError(f"{item}: no chip-to-chip bandwidth on record")


def _intensity(item: Item) -> Figure:
    # Roofline ridge point: peak FLOP/s over HBM B/s (Williams, Waterman & Patterson, 2009),
    # for the whole chip: its dense BF16 rating against its HBM bandwidth.
    peak, bw = item.figure("peak.bf16"), item.figure("hbm_bandwidth")
    return Figure(
        name=f"{item.key}.intensity.bf16",
        value=peak.value / bw.value,
        unit="FLOP/B",
        sources=peak.sources + bw.sources,
        why=f"chip roofline: {si(peak.value, 'FLOP/s')} / {si(bw.value, 'B/s')}",
        computed=True,
        extra={
            "cited": (
                (f"BF16 peak ({si(peak.value, 'FLOP/s')})", peak.sources),
                (f"HBM bandwidth ({si(bw.value, 'B/s')})", bw.sources),
            )
        },
    )


def _network(item: Item) -> Figure:
    if not isinstance(item, System) or item.network_bandwidth is None:
        raise CatalogError(f"{item}: no scale-out network figure on record")
    if "network" in item.figures:
        return item.figures["network"]
    chips = item.figures["chips"]
    if "efa_per_chip" in item.figures:
        efa = item.figures["efa_per_chip"]
        cited = (
            (f"chip count ({item.chips})", chips.sources),
            (f"EFA per chip ({si(efa.value, 'bit/s')})", efa.sources),
        )
        why = f"{item.chips} chips x {si(efa.value, 'bit/s')}"
    else:  # built from instances: their network figures summed
        part = _network(item.part)
        cited = (
            (f"{item.parts} x {item.part.name}", item.figures.get("instances", chips).sources),
            (f"network per {item.part.name} ({si(part.value, 'bit/s')})", part.sources),
        )
        why = f"{item.parts} x {si(part.value, 'bit/s')}"
    return Figure(
        name=f"{item.key}.network",
        value=item.network_bandwidth,
        unit="bit/s",
        sources=tuple(s for _, group in cited for s in group),
        why=why,
        computed=True,
        extra={"cited": cited},
    )


_FP8_NOTE = "Plain FP8 means E4M3/E5M2 inputs without MX block scales."
_RIDGE_NOTE = (
    "This ridge is the whole chip's roofline: its dense BF16 peak over its HBM bandwidth. The "
    "MatmulStepper's ridge is a different roofline, one NeuronCore's peak over that core's DMA "
    "bandwidth, so the two figures differ."
)


def _peak(d: str, label: str, note: str = "") -> Metric:
    return Metric(f"peak.{d}", label, "FLOP/s", ("chip", "system"), _fig(f"peak.{d}"), True, note)


_M = [
    _peak("bf16", "Dense BF16 peak"),
    _peak("fp8", "Dense FP8 peak (plain FP8, no MX scales)", _FP8_NOTE),
    _peak("mxfp8", "Dense MXFP8 peak"),
    _peak("mxfp4", "Dense MXFP4 peak"),
    _peak("fp32", "Dense FP32 peak"),
    Metric(
        "peak_sparse.bf16",
        "Sparse BF16 peak (best N:M)",
        "FLOP/s",
        ("chip", "system"),
        _fig("peak_sparse.bf16"),
        True,
    ),
    Metric(
        "peak_sparse.fp8",
        "Sparse FP8 peak (best N:M)",
        "FLOP/s",
        ("chip", "system"),
        _fig("peak_sparse.fp8"),
        True,
    ),
    Metric("hbm_bytes", "HBM capacity", "B", ("chip", "system"), _fig("hbm_bytes"), True),
    Metric(
        "hbm_bandwidth", "HBM bandwidth", "B/s", ("chip", "system"), _fig("hbm_bandwidth"), True
    ),
    Metric(
        "intensity.bf16",
        "Ridge point: chip BF16 peak / HBM bandwidth",
        "FLOP/B",
        ("chip",),
        _intensity,
        note=_RIDGE_NOTE,
    ),
    Metric("sbuf_bytes", "On-chip SBUF", "B", ("chip",), _fig("sbuf_bytes")),
    Metric("link_bandwidth", "Chip-to-chip link bandwidth", "B/s", ("chip",), _link),
    Metric("power", "Power per chip", "W", ("chip",), _fig("power")),
    Metric("chips", "Chips", "chips", ("system",), _fig("chips")),
    Metric("network", "Scale-out network (EFA)", "bit/s", ("system",), _network),
    Metric("price_per_hour", "On-demand price", "USD/h", ("system",), _fig("price_per_hour")),
]
METRICS: dict[str, Metric] = {m.key: m for m in _M}

#: Published totals shown on another metric's chart too: sources print the 8-bit totals of
#: Trainium3 systems as "FP8 / MXFP8" (the MX rate), so the FP8 chart shows them, marked MXFP8.
_ALSO_ON = {"peak.mxfp8": "peak.fp8"}


def _metric_of(published_key: str) -> str | None:
    """The metric a published system total (a key of ``System.published``) is a value of."""
    if published_key in ("hbm_bytes", "hbm_bandwidth", "network"):
        return published_key
    m = re.fullmatch(r"([a-z0-9]+)_(dense|sparse)_flops", published_key)
    if m:
        return f"{'peak' if m.group(2) == 'dense' else 'peak_sparse'}.{m.group(1)}"
    return None  # cores: no metric of the explorer


def _bytes(value: float) -> str:
    """A byte count in both conventions, the one it is a whole number of first."""
    gb, gib = si(value, "B", binary_bytes=False), si(value, "B")
    return f"{gib} ({gb})" if value % GIB == 0 else f"{gb} ({gib})"


def _lower(label: str) -> str:
    """A label inside a sentence: "Dense FP8 peak" -> "dense FP8 peak"."""
    return label[:1].lower() + label[1:]


def value_text(value: float, unit: str) -> str:
    """A value with its unit as the explorer shows it (bytes in GiB and GB)."""
    return _bytes(value) if unit == "B" else si(value, unit)
