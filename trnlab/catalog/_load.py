"""Read the TOML data files into typed catalogue objects (once, on first use)."""

from __future__ import annotations

import dataclasses
import difflib
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from ._chips import Chip, NeuronCoreSpec, core_derived
from ._figures import CatalogError, Figure, Source, is_figure_table, parse_figure
from ._systems import System

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["Catalog", "load"]

_CHIP_META = {
    "name",
    "aliases",
    "vendor",
    "kind",
    "status",
    "generation",
    "core",
    "relative_to",
    "note",
}
_CHIP_GROUPS = {"peak", "published_sparse", "claims", "targets"}
_CORE_GROUPS = {"tensor_rate", "published_peak"}
_SYSTEM_META = {"kind", "aliases", "chip", "instance", "name"}


@dataclass(frozen=True)
class Catalog:
    """Everything the data files hold, typed and cross-checked."""

    sources: dict[str, Source]
    cores: dict[str, NeuronCoreSpec]
    chips: dict[str, Chip]
    systems: dict[str, System]
    chip_aliases: dict[str, str]
    system_aliases: dict[str, str]
    tables: dict[str, dict[str, Figure]] = dataclasses.field(default_factory=dict)

    def chip(self, name: str) -> Chip:
        return self.chips[_lookup("chip", name, self.chips, self.chip_aliases)]

    def system(self, name: str) -> System:
        return self.systems[_lookup("system", name, self.systems, self.system_aliases)]


def _lookup(kind: str, name: Any, table: dict, aliases: dict[str, str]) -> str:
    if isinstance(name, str):
        key = name.strip().lower()
        if key in table:
            return key
        if key in aliases:
            return aliases[key]
    known = ", ".join(f"{k} ({getattr(v, 'name', k)})" for k, v in table.items())
    near = difflib.get_close_matches(str(name).lower(), list(table) + list(aliases), n=1)
    hint = f" Did you mean {aliases.get(near[0], near[0])!r}?" if near else ""
    raise CatalogError(f"unknown {kind} {name!r}.{hint} The catalogue has: {known}.")


def _read(name: str) -> dict[str, Any]:
    text = resources.files("trnlab.catalog").joinpath("data", name).read_text("utf-8")
    return tomllib.loads(text)


def _merge(into: dict[str, Any], add: dict[str, Any], where: str, path: str = "") -> None:
    """Deep-merge ``add`` into ``into``; a figure defined in two files is an error."""
    for key, value in add.items():
        here = f"{path}.{key}" if path else key
        if key not in into:
            into[key] = value
        elif isinstance(into[key], dict) and isinstance(value, dict) and not is_figure_table(value):
            _merge(into[key], value, where, here)
        else:
            raise CatalogError(
                f"{here} is defined twice ({where} repeats it): one figure, one place"
            )


def _read_hardware() -> dict[str, Any]:
    """hardware.toml plus every other data file except sources.toml, merged.

    Topic files (e.g. NeuronCore engine costs, fabric links) add figures to the same
    cores/chips/systems tables without repeating any.
    """
    data = _read("hardware.toml")
    folder = resources.files("trnlab.catalog").joinpath("data")
    extra = sorted(
        p.name
        for p in folder.iterdir()
        if p.name.endswith(".toml") and p.name not in {"hardware.toml", "sources.toml"}
    )
    for name in extra:
        _merge(data, _read(name), name)
    return data


def _figures(prefix: str, table: dict[str, Any], sources, skip) -> dict[str, Figure]:
    return {
        k: parse_figure(f"{prefix}.{k}", v, sources)
        for k, v in table.items()
        if k not in skip and is_figure_table(v)
    }


def _core(key: str, raw: dict[str, Any], sources) -> NeuronCoreSpec:
    skip = {"name"} | _CORE_GROUPS
    return NeuronCoreSpec(
        key=key,
        name=raw["name"],
        figures=_figures(f"cores.{key}", raw, sources, skip),
        tensor_rate=_figures(f"cores.{key}.tensor_rate", raw.get("tensor_rate", {}), sources, ()),
        published_peak=_figures(
            f"cores.{key}.published_peak", raw.get("published_peak", {}), sources, ()
        ),
    )


def _peaks(key: str, raw: dict[str, Any], figures, core, sources) -> dict[str, Figure]:
    """Per-dtype dense peak figures: the published ones, each with the core-derived value
    added as an alternative; dtypes with only a core rate get the computed value."""
    peaks: dict[str, Figure] = {}
    for entry in raw.get("peak", []):
        fig = parse_figure(f"{key}.peak", entry, sources)
        for d in entry["dtypes"]:
            extra = ()
            why = fig.why
            if core is not None and d in core.tensor_rate and "cores" in figures:
                derived = core_derived(key, figures["cores"], core, d)
                extra = (derived,)
                gap = derived.value / fig.value - 1
                why = (
                    f"{why} Cores x per-core peak gives {derived.value / 1e12:,.0f} T ({gap:+.1%})."
                )
            peaks[d] = dataclasses.replace(
                fig, name=f"{key}.peak.{d}", alternatives=fig.alternatives + extra, why=why
            )
    if core is not None and "cores" in figures:
        for d in core.dtypes:
            if d not in peaks:
                alt = core_derived(key, figures["cores"], core, d)
                peaks[d] = Figure(
                    name=f"{key}.peak.{d}",
                    value=alt.value,
                    unit="FLOP/s",
                    sources=alt.sources,
                    why=f"no published chip rating; {alt.note}",
                    computed=True,
                )
    return peaks


def _chip(key, raw, cores, chips, sources) -> Chip:
    core = cores[raw["core"]] if "core" in raw else None
    figures = _figures(key, raw, sources, _CHIP_META | _CHIP_GROUPS)
    published_sparse = tuple(
        (tuple(e["dtypes"]), parse_figure(f"{key}.published_sparse", e, sources))
        for e in raw.get("published_sparse", [])
    )
    return Chip(
        key=key,
        name=raw["name"],
        vendor=raw["vendor"],
        kind=raw["kind"],
        status=raw["status"],
        generation=raw["generation"],
        core=core,
        figures=figures,
        peaks=_peaks(key, raw, figures, core, sources),
        published_sparse=published_sparse,
        claims=_figures(f"{key}.claims", raw.get("claims", {}), sources, ()),
        targets=_figures(f"{key}.targets", raw.get("targets", {}), sources, ()),
        reference=chips[raw["relative_to"]] if "relative_to" in raw else None,
        note=raw.get("note", ""),
    )


def _system(key, raw, chips, systems, sources) -> System:
    figures = _figures(key, raw, sources, _SYSTEM_META | {"published"})
    published = _figures(f"{key}.published", raw.get("published", {}), sources, ())
    # Vendor HBM totals for Neuron systems are sums of GiB printed as decimal GB/TB.
    for name, fig in published.items():
        if name == "hbm_bytes" and chips[raw["chip"]].kind == "neuron":
            published[name] = dataclasses.replace(
                fig, extra={**fig.extra, "counts_gib_as_gb": True}
            )
    part, parts = None, 1
    if "chips" not in figures:
        if "instances" in figures:
            part = systems[raw["instance"]]
            parts = int(figures["instances"].value)
            n, why = parts * part.chips, f"{parts} instances x {part.chips} chips"
            src = figures["instances"].sources + part.figures["chips"].sources
        else:
            sleds, per = figures["sleds"], figures["chips_per_sled"]
            n, why = int(sleds.value * per.value), f"{sleds.value} sleds x {per.value} chips"
            src = sleds.sources + per.sources
        figures["chips"] = Figure(f"{key}.chips", n, "chips", src, why=why, computed=True)
    pretty = raw.get("name") or {
        "trn2-ultraserver": "Trn2 UltraServer",
        "trn3-ultraserver-gen1": "Trn3 UltraServer Gen1",
        "trn3-ultraserver-gen2": "Trn3 UltraServer Gen2",
    }.get(key, key)
    return System(
        key=key,
        name=pretty,
        kind=raw["kind"],
        chip=chips[raw["chip"]],
        chips=int(figures["chips"].value),
        figures=figures,
        published=published,
        part=part,
        parts=parts,
    )


@lru_cache(maxsize=1)
def load() -> Catalog:
    """Parse and cross-check the data files; cached, so every caller shares one catalogue."""
    raw_sources = _read("sources.toml")
    sources = {
        k: Source(key=k, title=v["title"], url=v["url"], kind=v["kind"], note=v.get("note", ""))
        for k, v in raw_sources.items()
    }
    data = _read_hardware()
    cores = {k: _core(k, v, sources) for k, v in data["cores"].items()}
    chips: dict[str, Chip] = {}
    # Announced chips are defined relative to another chip, so build them last.
    for key, raw in sorted(data["chips"].items(), key=lambda kv: "relative_to" in kv[1]):
        chips[key] = _chip(key, raw, cores, chips, sources)
    chips = {k: chips[k] for k in data["chips"]}  # keep the file's order
    systems: dict[str, System] = {}
    for key, raw in data["systems"].items():
        systems[key] = _system(key, raw, chips, systems, sources)

    def aliases(table, raw_table):
        out = {}
        for key, raw in raw_table.items():
            for a in [*raw.get("aliases", []), table[key].name]:
                out[a.lower()] = key
        return out

    # Other top-level tables (e.g. [collectives] in fabric.toml) are groups of plain figures.
    tables = {
        name: _figures(name, table, sources, ())
        for name, table in data.items()
        if name not in {"cores", "chips", "systems"} and isinstance(table, dict)
    }
    return Catalog(
        tables=tables,
        sources=sources,
        cores=cores,
        chips=chips,
        systems=systems,
        chip_aliases=aliases(chips, data["chips"]),
        system_aliases=aliases(systems, data["systems"]),
    )
