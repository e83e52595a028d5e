"""Systems: instances, UltraServers and UltraClusters, with totals computed from their chips.

Nothing here is typed twice: a system's peak, HBM and bandwidth are its chip count times the
chip's figures. The vendor's own totals sit beside them in ``System.published``, and
:meth:`System.compare` says, figure by figure, whether they agree within the rounding the
vendor printed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trnlab._checks import short, whole

from ._chips import Chip, figure_name
from ._figures import CatalogError, Figure

__all__ = ["Comparison", "System", "cluster", "stated_tolerance"]

GIB = 2**30


@dataclass(frozen=True)
class Comparison:
    """A published system total next to the value trnlab computes from per-chip figures."""

    figure: str
    stated: str
    published: float
    computed: float
    tolerance: float
    note: str = ""

    @property
    def ratio(self) -> float:
        """computed / published."""
        return self.computed / self.published

    @property
    def agrees(self) -> bool:
        """True when the computed value rounds to what the vendor printed."""
        return abs(self.computed - self.published) <= self.tolerance * self.published


def stated_tolerance(stated: str) -> float:
    """Relative rounding implied by how a figure was printed.

    "20.8 PFLOPS" means 20.75-20.85 (half a unit in the last digit); a leading "~" widens it
    to a full unit ("~185 TB/s": 184-186).

    >>> round(stated_tolerance("20.8 PFLOPS"), 5)
    0.0024
    """
    if not isinstance(stated, str):
        raise CatalogError(
            f"a stated figure is the text a vendor printed, such as '20.8 PFLOPS', not {short(stated)}"
        )
    m = re.match(r"\s*(~)?\s*([0-9][0-9,]*)(?:\.([0-9]+))?", stated)
    if not m:
        raise CatalogError(f"cannot read a number from the stated figure {stated!r}")
    approx, whole, frac = m.group(1), m.group(2).replace(",", ""), m.group(3) or ""
    number = float(f"{whole}.{frac}" if frac else whole)
    if number == 0:
        raise CatalogError(
            f"the stated figure {stated!r} is zero, which has no relative rounding; a published "
            f"total is a positive number"
        )
    unit = 10.0 ** (-len(frac))
    return (unit if approx else unit / 2) / number


@dataclass(frozen=True)
class System:
    """A system of chips: an instance, an UltraServer, or an UltraCluster.

    Attributes
    ----------
    key : str
        Catalogue key (``"trn2.48xlarge"``, ``"trn3-ultraserver-gen2"``).
    kind : str
        ``"instance"``, ``"ultraserver"`` or ``"ultracluster"``.
    chip : Chip
        The accelerator it is built from.
    chips : int
        Number of chips (computed for systems built from instances or sleds).
    """

    key: str
    name: str
    kind: str
    chip: Chip
    chips: int
    figures: Mapping[str, Figure]
    published: Mapping[str, Figure] = field(default_factory=dict)
    part: System | None = None
    parts: int = 1

    def __str__(self) -> str:
        return self.name

    # Totals ---------------------------------------------------------------------------------
    def peak_flops(self, dtype: str, sparse: bool = False) -> float:
        """Peak of all chips in FLOP/s: chips x the chip's peak (see :meth:`Chip.peak_flops`)."""
        return self.chips * self.chip.peak_flops(dtype, sparse=sparse)

    @property
    def hbm_bytes(self) -> int:
        return self.chips * self.chip.hbm_bytes

    @property
    def hbm_bandwidth(self) -> float:
        return self.chips * self.chip.hbm_bandwidth

    @property
    def cores(self) -> int:
        if self.chip.cores is None:
            raise CatalogError(f"{self.chip} has no core count on record")
        return self.chips * self.chip.cores

    @property
    def network_bandwidth(self) -> float | None:
        """Scale-out network bandwidth (EFA) in bit/s, or None if no source gives it."""
        if "network" in self.figures:
            return float(self.figures["network"].value)
        if "efa_per_chip" in self.figures:
            return self.chips * float(self.figures["efa_per_chip"].value)
        if self.part is not None and self.part.network_bandwidth is not None:
            return self.parts * self.part.network_bandwidth
        return None

    @property
    def price_per_hour(self) -> float | None:
        """On-demand price in USD/h where published (or the sum of its parts' prices)."""
        if "price_per_hour" in self.figures:
            return float(self.figures["price_per_hour"].value)
        if self.part is not None and self.part.price_per_hour is not None:
            return self.parts * self.part.price_per_hour
        return None

    @property
    def topology(self) -> str:
        """Fabric inside the system: ``single``, ``ring``, ``torus2d``, ``torus3d``, ``switch``
        or ``efa``."""
        if "topology" in self.figures:
            return str(self.figures["topology"].value)
        return "single" if self.chips == 1 else "efa"

    @property
    def fabric(self) -> str:
        return str(self.figures["fabric"].value) if "fabric" in self.figures else self.topology

    def figure(self, name: str) -> Figure:
        """A figure by name; totals (``hbm_bytes``, ``peak.fp8``...) come back computed."""
        name = figure_name(name, self)
        if name in self.figures:
            return self.figures[name]
        group, _, sub = name.partition(".")
        if group == "published" and sub in self.published:
            return self.published[sub]
        chip_name = {"hbm_bytes": "hbm_bytes", "hbm_bandwidth": "hbm_bandwidth"}.get(name, name)
        chip_fig = self.chip.figure(chip_name)
        if not isinstance(chip_fig.value, int | float) or isinstance(chip_fig.value, bool):
            return chip_fig
        return Figure(
            name=f"{self.key}.{name}",
            value=self.chips * chip_fig.value,
            unit=chip_fig.unit,
            sources=self.figures["chips"].sources + chip_fig.sources,
            why=f"{self.chips} chips x {chip_fig.value:g} {chip_fig.unit} ({chip_fig.name})",
            computed=True,
        )

    # Published totals -----------------------------------------------------------------------
    def compare(self) -> list[Comparison]:
        """Each published total beside trnlab's computed value, with the stated rounding."""
        rows = []
        for key, fig in self.published.items():
            computed, note = self._computed_for(key, fig)
            stated = fig.extra.get("stated", f"{fig.value:g}")
            rows.append(
                Comparison(
                    figure=key,
                    stated=stated,
                    published=float(fig.value),
                    computed=float(computed),
                    # A total printed as a multiple of another rounded figure carries its rounding.
                    tolerance=stated_tolerance(fig.extra.get("rounding_of", stated)),
                    note=note or fig.note,
                )
            )
        return rows

    def _computed_for(self, key: str, fig: Figure) -> tuple[float, str]:
        if key == "hbm_bytes":
            if fig.extra.get("counts_gib_as_gb"):
                # The vendor multiplies GiB per chip by the chip count and prints the result
                # with a decimal prefix ("16 x 96 GiB = 1,536 GB = 1.5 TB").
                return self.hbm_bytes / GIB * 1e9, "GiB per chip counted as GB, as the vendor does"
            return self.hbm_bytes, ""
        if key == "hbm_bandwidth":
            return self.hbm_bandwidth, ""
        if key == "cores":
            return self.cores, ""
        if key == "network":
            return self.network_bandwidth or 0.0, ""
        m = re.fullmatch(r"([a-z0-9]+)_(dense|sparse)_flops", key)
        if m:
            return self.peak_flops(m.group(1), sparse=m.group(2) == "sparse"), ""
        raise CatalogError(f"{self.key}: no computed counterpart for published figure {key!r}")


def cluster(system: System, count: int) -> System:
    """An UltraCluster of ``count`` copies of ``system`` joined by EFA.

    Parameters
    ----------
    system : System
        The building block (an instance or an UltraServer).
    count : int
        How many of them (1 to the number that keeps the cluster within a million chips).
    """
    count = whole(count, "count (systems in the cluster)", 1, None, CatalogError)
    chips = count * system.chips
    if chips > 1_000_000:
        raise CatalogError(
            f"{count} x {system} = {chips:,} chips; trnlab models UltraClusters up to 1,000,000 "
            f"chips (AWS's 'up to 1 million'). Use at most {1_000_000 // system.chips:,} systems."
        )
    figures: dict[str, Any] = {
        "chips": Figure(
            name=f"{count}x{system.key}.chips",
            value=chips,
            unit="chips",
            sources=system.figures["chips"].sources,
            why=f"{count} x {system.chips}",
            computed=True,
        ),
        "topology": Figure(
            name=f"{count}x{system.key}.topology",
            value="efa",
            unit="",
            sources=system.figures["chips"].sources,
            why="UltraCluster tier: systems joined by EFA",
            computed=True,
        ),
    }
    return System(
        key=f"{count}x{system.key}",
        name=f"UltraCluster of {count:,} x {system.name}",
        kind="ultracluster",
        chip=system.chip,
        chips=chips,
        figures=figures,
        part=system,
        parts=count,
    )
