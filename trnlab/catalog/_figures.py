"""Figures and sources: a value, its unit, where it comes from, and what else was published.

A :class:`Figure` is what every catalogue number is. Where sources disagree it keeps every
published value as an :class:`Alternative`, marks the one the model uses, and says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trnlab._errors import TrnlabError

__all__ = ["Alternative", "CatalogError", "Figure", "Source", "parse_figure"]


class CatalogError(TrnlabError):
    """A request the catalogue cannot answer; the message says what exists instead."""


@dataclass(frozen=True)
class Source:
    """Where a figure comes from."""

    key: str
    title: str
    url: str
    kind: str
    note: str = ""

    def __str__(self) -> str:
        return f"{self.title} <{self.url}>"


@dataclass(frozen=True)
class Alternative:
    """One published (or computed) value of a disputed figure."""

    label: str
    value: Any
    sources: tuple[Source, ...]
    note: str = ""
    used: bool = False


@dataclass(frozen=True)
class Figure:
    """A catalogue figure: value, unit, sources, and the alternatives where sources disagree.

    Attributes
    ----------
    name : str
        Dotted name, e.g. ``"trn2.hbm_bandwidth"``.
    value : float, int, str, bool or tuple
        The value the model uses.
    unit : str
        SI-style unit (``B``, ``B/s``, ``FLOP/s``, ``Hz``, ``bit/s``, ``W``, ``USD/h``) or ``""``.
    sources : tuple of Source
        Sources of the value in use (for a computed figure, the sources of its inputs).
    alternatives : tuple of Alternative
        Every value on record, the used one included, when sources disagree; empty otherwise.
    why : str
        Why the model uses this value, for disputed or computed figures.
    note : str
        Anything a reader should know (what the vendor printed, what a value means).
    computed : bool
        True for aggregates computed by trnlab from other figures.
    """

    name: str
    value: Any
    unit: str
    sources: tuple[Source, ...]
    alternatives: tuple[Alternative, ...] = ()
    why: str = ""
    note: str = ""
    computed: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def disputed(self) -> bool:
        """True when more than one value is on record."""
        return len(self.alternatives) > 1

    @property
    def source_keys(self) -> tuple[str, ...]:
        return tuple(s.key for s in self.sources)

    def spread(self) -> float:
        """Largest over smallest numeric value on record (1.0 when undisputed)."""
        values = [a.value for a in self.alternatives if isinstance(a.value, int | float)]
        if len(values) < 2 or min(values) <= 0:
            return 1.0
        return max(values) / min(values)

    def describe(self) -> str:
        """A one-paragraph, human-readable account of the figure and its sources."""
        lines = [f"{self.name} = {self.value!r} {self.unit}".rstrip()]
        if self.computed:
            lines.append(f"  computed: {self.why}")
        for s in self.sources:
            lines.append(f"  source: {s.title} ({s.kind}) <{s.url}>")
        if self.note:
            lines.append(f"  note: {self.note}")
        if self.disputed:
            lines.append("  sources disagree:")
            for a in self.alternatives:
                mark = "*" if a.used else " "
                keys = ", ".join(s.key for s in a.sources)
                lines.append(f"   {mark} {a.label}: {a.value!r} [{keys}] {a.note}".rstrip())
            if not self.computed:
                lines.append(f"  why the model uses '*': {self.why}")
        return "\n".join(lines)


def parse_figure(name: str, raw: Mapping[str, Any], sources: Mapping[str, Source]) -> Figure:
    """Build a :class:`Figure` from its TOML table, resolving source keys.

    Raises
    ------
    CatalogError
        If the table has no source, names an unknown source, or marks an unknown value as used.
    """
    if "values" in raw:
        use = raw.get("use")
        alts = tuple(
            Alternative(
                label=a["label"],
                value=a["value"],
                sources=_resolve(name, a.get("sources", ()), sources),
                note=a.get("note", ""),
                used=a["label"] == use,
            )
            for a in raw["values"]
        )
        chosen = [a for a in alts if a.used]
        if len(chosen) != 1:
            labels = [a.label for a in alts]
            raise CatalogError(f"{name}: 'use = {use!r}' must name one of the values {labels}")
        if not raw.get("why"):
            raise CatalogError(f"{name}: a disputed figure must say why the model uses {use!r}")
        return Figure(
            name=name,
            value=chosen[0].value,
            unit=raw.get("unit", ""),
            sources=chosen[0].sources,
            alternatives=alts,
            why=raw["why"],
            note=chosen[0].note or raw.get("note", ""),
        )
    if "value" not in raw:
        raise CatalogError(f"{name}: a figure needs 'value' or 'values'")
    value = raw["value"]
    if isinstance(value, list):
        value = tuple(value)
    extra = {k: v for k, v in raw.items() if k not in {"value", "unit", "sources", "note"}}
    return Figure(
        name=name,
        value=value,
        unit=raw.get("unit", ""),
        sources=_resolve(name, raw.get("sources", ()), sources),
        note=raw.get("note", ""),
        extra=extra,
    )


def _resolve(name: str, keys, sources: Mapping[str, Source]) -> tuple[Source, ...]:
    if not keys:
        raise CatalogError(f"{name}: every figure needs at least one source")
    missing = [k for k in keys if k not in sources]
    if missing:
        raise CatalogError(f"{name}: unknown source(s) {missing}; known: {sorted(sources)}")
    return tuple(sources[k] for k in keys)


def is_figure_table(raw: Any) -> bool:
    """True for a TOML table that is a figure (not a nested group of figures)."""
    return isinstance(raw, Mapping) and ("value" in raw or "values" in raw)
