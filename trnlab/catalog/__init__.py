"""The chip catalogue: every hardware figure trnlab uses, with its sources.

>>> from trnlab import catalog
>>> trn2 = catalog.chip("trn2")
>>> trn2.peak_flops("fp8") / 1e15
1.299
>>> catalog.system("trn2.48xlarge").chips
16

Figures whose sources disagree keep every value, mark the one the model uses and say why:
``catalog.figure("trn1.hbm_bandwidth").describe()``.
"""

from __future__ import annotations

from trnlab._checks import choose, short

from ._chips import Chip, NeuronCoreSpec
from ._dtypes import DTYPES, dtype_name
from ._figures import Alternative, CatalogError, Figure, Source
from ._load import load
from ._measurements import measurements
from ._systems import Comparison, System, stated_tolerance
from ._systems import cluster as _cluster

__all__ = [
    "DTYPES",
    "Alternative",
    "CatalogError",
    "Chip",
    "Comparison",
    "Figure",
    "NeuronCoreSpec",
    "Source",
    "System",
    "chip",
    "chips",
    "cluster",
    "core",
    "cores",
    "dtype_name",
    "figure",
    "measurements",
    "sources",
    "stated_tolerance",
    "system",
    "systems",
    "table",
]


def chip(name: str) -> Chip:
    """The chip called ``name`` (key, alias or name: ``"trn2"``, ``"Trainium2"``, ``"h100"``).

    Raises
    ------
    CatalogError
        For an unknown name; the message lists every chip in the catalogue.
    """
    return load().chip(name)


def chips(kind: str | None = None) -> list[Chip]:
    """All chips, in catalogue order; ``kind="neuron"`` or ``"gpu"`` to filter."""
    out = list(load().chips.values())
    if kind is not None:
        kind = choose(kind, sorted({c.kind for c in out}), "chip kind", CatalogError)
        out = [c for c in out if c.kind == kind]
    return out


def system(name: str) -> System:
    """The system called ``name`` (``"trn2.48xlarge"``, ``"trn3-ultraserver-gen2"``...).

    Raises
    ------
    CatalogError
        For an unknown name; the message lists every system in the catalogue.
    """
    return load().system(name)


def systems() -> list[System]:
    """All systems of the catalogue, from one chip to the 144-chip Trn3 UltraServer."""
    return list(load().systems.values())


def cluster(base: str | System, count: int) -> System:
    """An UltraCluster of ``count`` systems joined by EFA (``cluster("trn3-ultraserver-gen2", 100)``)."""
    if not isinstance(base, str | System):
        raise CatalogError(
            f"cluster base must be a system of the catalogue (a name such as 'trn2-ultraserver' "
            f"or a System), not {short(base)}"
        )
    return _cluster(system(base) if isinstance(base, str) else base, count)


def core(name: str) -> NeuronCoreSpec:
    """A NeuronCore generation: ``"v2"``, ``"v3"``, ``"v4"`` (or ``"NeuronCore-v3"``)."""
    cat = load()
    names = {c.name.lower(): k for k, c in cat.cores.items()}
    return cat.cores[choose(name, cat.cores, "NeuronCore generation", CatalogError, names)]


def cores() -> list[NeuronCoreSpec]:
    """All NeuronCore generations."""
    return list(load().cores.values())


def table(name: str) -> dict[str, Figure]:
    """A group of figures that belongs to no chip or system, e.g. ``table("collectives")``
    (the fixed costs of collective operations, by tier).

    Raises
    ------
    CatalogError
        For an unknown group; the message lists the groups on record.
    """
    cat = load()
    return dict(cat.tables[choose(name, cat.tables, "figure group", CatalogError)])


def sources() -> dict[str, Source]:
    """Every source the catalogue cites, by key."""
    return dict(load().sources)


def figure(path: str) -> Figure:
    """Any figure by dotted path: ``"trn2.hbm_bandwidth"``, ``"trn2.48xlarge.peak.fp8"``,
    ``"v3.tensor_clock"``, ``"trn3.peak_sparse.bf16"``.

    The first part names a chip, a system or a core (longest match wins, so system names
    with dots work); the rest names the figure.
    """
    cat = load()
    if not isinstance(path, str):
        raise CatalogError(
            f"a figure path is a dotted string such as 'trn2.hbm_bandwidth', not {short(path)}"
        )
    key = path.strip().lower()
    owners = {**{k: cat.chips[k] for k in cat.chips}, **cat.systems, **cat.cores}
    head = max((k for k in owners if key.startswith(k + ".")), key=len, default=None)
    if head is None:
        raise CatalogError(
            f"cannot find the owner of figure path {path!r}: start with a chip ({', '.join(cat.chips)}), "
            f"a system ({', '.join(cat.systems)}) or a core ({', '.join(cat.cores)})."
        )
    return owners[head].figure(key[len(head) + 1 :])
