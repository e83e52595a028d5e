"""Topologies and collectives of Trainium fabrics: closed forms and chunk-level simulation.

>>> from trnlab import fabric
>>> r = fabric.collective("all_reduce", 1 << 30, system="trn2.48xlarge", algorithm="ring")
>>> round(r.busbw / 1e9, 1)  # approaches the 128 GB/s per direction of a NeuronLink-v3 link
127.6

Fabrics come from the catalogue (``fabric.topology("trn3-ultraserver-gen2")``, or an
UltraCluster ``catalog.cluster("trn2-ultraserver", 16)``); bandwidths are sourced figures,
latencies and the direction convention are assumptions kept in :class:`FabricParams`.
numba is imported only when a simulation runs.
"""

from __future__ import annotations

from ._algorithms import ALGORITHMS, OPS, Estimate
from ._bisection import all_to_all_bound, bisection_bandwidth
from ._collective import (
    CollectiveResult,
    Schedule,
    algorithms,
    bus_factor,
    closed_form,
    collective,
)
from ._params import FabricError, FabricParams
from ._topology import NODE_KINDS, TIER_NAMES, Topology, ring, topology, torus

__all__ = [
    "ALGORITHMS",
    "NODE_KINDS",
    "OPS",
    "TIER_NAMES",
    "CollectiveResult",
    "Estimate",
    "FabricError",
    "FabricParams",
    "Schedule",
    "Topology",
    "algorithms",
    "all_to_all_bound",
    "bisection_bandwidth",
    "bus_factor",
    "closed_form",
    "collective",
    "ring",
    "topology",
    "torus",
]
