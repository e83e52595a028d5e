"""Topologies and collectives of Trainium fabrics: closed forms and chunk-level simulation.

>>> from trnlab import fabric
>>> r = fabric.collective("all_reduce", 1 << 30, system="trn2.48xlarge", algorithm="ring")
>>> round(r.busbw / 1e9, 1)  # the calibrated 32.5% of a NeuronLink-v3 link's 128 GB/s
41.6

Fabrics come from the catalogue (``fabric.topology("trn3-ultraserver-gen2")``, or an
UltraCluster ``catalog.cluster("trn2-ultraserver", 16)``); ``fabric.group(system, size, stride)``
is the part of it a parallel group talks over. Bandwidths, per-step latencies and the fixed
cost per collective are catalogue figures (``catalog.table("collectives")``); how a step splits
into software and wire, and the direction convention, are assumptions in :class:`FabricParams`.
numba is imported only when a simulation runs.
"""

from __future__ import annotations

from ._algorithms import ALGORITHMS, OPS, Estimate
from ._bisection import all_to_all_bound, bisection_bandwidth
from ._calibration import calibrate, calibrate_link_efficiency, calibrate_op_overhead
from ._collective import (
    CollectiveResult,
    Schedule,
    algorithms,
    bus_factor,
    closed_form,
    collective,
    runtime_choice,
)
from ._group import group
from ._params import RUNTIMES, FabricError, FabricParams
from ._published import NCCOM_RUNS, NccomRun
from ._topology import NODE_KINDS, TIER_NAMES, Topology, ring, topology, torus

__all__ = [
    "ALGORITHMS",
    "NCCOM_RUNS",
    "NODE_KINDS",
    "OPS",
    "RUNTIMES",
    "TIER_NAMES",
    "CollectiveResult",
    "Estimate",
    "FabricError",
    "FabricParams",
    "NccomRun",
    "Schedule",
    "Topology",
    "algorithms",
    "all_to_all_bound",
    "bisection_bandwidth",
    "bus_factor",
    "calibrate",
    "calibrate_link_efficiency",
    "calibrate_op_overhead",
    "closed_form",
    "collective",
    "group",
    "ring",
    "runtime_choice",
    "topology",
    "torus",
]
