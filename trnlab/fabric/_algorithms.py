"""The registry of collective algorithms (strategies) and lookup by name."""

from __future__ import annotations

from ._base import OPS, Algorithm, Estimate
from ._direct import Direct
from ._hierarchical import Hierarchical
from ._params import FabricError
from ._ring import BidirectionalRing, Ring
from ._torus import Torus
from ._tree import RecursiveDoubling

__all__ = ["ALGORITHMS", "OPS", "Algorithm", "Estimate", "algorithm"]

ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (Ring(), BidirectionalRing(), Torus(), RecursiveDoubling(), Direct(), Hierarchical())
}
_ALIASES = {
    "tree": "recursive_doubling",
    "rdh": "recursive_doubling",
    "bidir_ring": "bidirectional_ring",
    "switch": "direct",
    "mesh": "direct",
}


def algorithm(name: str) -> Algorithm:
    """The algorithm called ``name`` (``tree`` and ``bidir_ring`` are aliases)."""
    key = str(name).strip().lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key not in ALGORITHMS:
        raise FabricError(
            f"unknown algorithm {name!r}; trnlab.fabric knows {', '.join(ALGORITHMS)} "
            "(aliases: tree, rdh, bidir_ring, mesh), 'auto' (the runtime's choice "
            "by size) and 'fastest' (the lowest closed form)"
        )
    return ALGORITHMS[key]
