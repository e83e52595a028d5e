"""The fabric a group of chips talks over, where a framework places it.

Frameworks give each parallel dimension a stride in the rank order (Megatron, NeuronX
Distributed: tensor parallelism innermost, data parallelism outermost), and ranks fill the
machine's fastest links first. A group of ``size`` chips at ``stride`` therefore occupies:

- on a torus: the fastest axes first. Each axis it covers becomes an axis of a smaller torus
  (a whole ring keeps its wrap-around; chips ``stride`` apart on a ring reach each other
  ``stride`` hops away); a group of 4 on the trn2 4x4 torus is one ring of 4 at 128 GB/s,
  a group of 32 on the Trn2 UltraServer is a 4x4x2 torus that crosses the 64 GB/s axis.
- on a switch: a smaller switch with the same port (a tiered switch: the bandwidth of the
  slowest level the group spans).
- in a cluster: inside one building block while it fits; beyond, a cluster of the group's
  local part over EFA (one EFA port per chip, counted once per direction).

Every collective time the planner needs then comes from :func:`trnlab.fabric.collective` on
that topology: one topology model for fabric and planner.
"""

from __future__ import annotations

import dataclasses
import math

from ._params import FabricError, FabricParams
from ._topology import Topology, topology, torus

__all__ = ["group"]


def group(system, size: int, stride: int = 1, params: FabricParams | None = None) -> Topology:
    """The topology of ``size`` chips placed ``stride`` apart in the system's rank order.

    Parameters
    ----------
    system : str, System or Topology
        Where the group lives (a catalogue system, an UltraCluster, or a Topology).
    size : int
        Chips in the group (1 to the system's chips).
    stride : int
        Rank distance between consecutive members: 1 for the innermost dimension (tensor
        parallelism), the product of the inner degrees for the others.
    params : FabricParams, optional
        Model assumptions.

    Returns
    -------
    Topology
        ``kind="single"`` for a group of one chip.

    Raises
    ------
    FabricError
        A size or stride that is not a whole number >= 1, or a group that needs more chips
        than the system has.

    Examples
    --------
    >>> from trnlab import fabric
    >>> fabric.group("trn2-ultraserver", 8).shape  # 8 chips: a 4-ring and a pair
    (4, 2)
    """
    topo = topology(system, params)
    for name, v in (("size", size), ("stride", stride)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise FabricError(f"group {name} must be a whole number >= 1, not {v!r}")
    if size * stride > topo.chips and size > 1:
        raise FabricError(
            f"a group of {size} chips {stride} apart spans {size * stride:,} ranks; "
            f"{topo.name} has {topo.chips:,} chips"
        )
    if size == 1:
        return Topology(name="one chip", kind="single", chips=1, shape=(1,))
    if size == topo.chips:
        return topo
    key = ("group", size, stride)
    if key not in topo.memo:
        topo.memo[key] = _place(topo, size, stride)
    return topo.memo[key]


def _place(t: Topology, size: int, stride: int) -> Topology:
    if t.kind == "torus":
        return _on_torus(t, size, stride)
    if t.kind == "switch":
        return _on_switch(t, size, stride)
    if t.kind == "cluster":
        return _on_cluster(t, size, stride)
    raise FabricError(f"{t.name} has one chip: a group of {size} does not fit")


def _placement_axes(t: Topology) -> list[int]:
    """Torus axes in the order ranks fill them: fastest links first (ties: last axis first,
    the C order of chip indices)."""
    k = len(t.shape)
    return sorted(range(k), key=lambda j: (-t.axis_bandwidth[j], -j))


def _on_torus(t: Topology, size: int, stride: int) -> Topology:
    left, step = size, stride
    shape, bw, lat = [], [], []
    for j in _placement_axes(t):
        if left == 1:
            break
        d = t.shape[j]
        if step >= d:
            if step % d:
                return _fallback(t, size, stride)
            step //= d
            continue
        if d % step:
            return _fallback(t, size, stride)
        avail = d // step
        take = min(avail, left)
        if left % take or (take < avail and left != take):
            return _fallback(t, size, stride)
        shape.append(take)
        bw.append(t.axis_bandwidth[j])
        lat.append(t.axis_latency[j] * step)  # members `step` hops apart on this ring
        left //= take
        step = 1
    if left != 1:
        return _fallback(t, size, stride)
    sub = torus(
        tuple(shape),
        tuple(bw),
        tuple(lat),
        t.message_overhead,
        name=f"{size} chips of {t.name} ({'x'.join(map(str, shape))})",
        op_overhead=t.op_overhead,
    )
    return dataclasses.replace(sub, notes=t.notes, runtime=t.runtime)


def _fallback(t: Topology, size: int, stride: int) -> Topology:
    """A group that does not tile the torus axes: a ring through its chips at the slowest
    link it may cross, with the longest hop's latency (an estimate, said in its name)."""
    span = size * stride
    bw, lat, covered = math.inf, 0.0, 1
    for j in _placement_axes(t):
        bw, lat = min(bw, t.axis_bandwidth[j]), max(lat, t.axis_latency[j])
        covered *= t.shape[j]
        if covered >= span:
            break
    hops = max(1, stride)
    sub = torus(
        (size,),
        bw,
        lat * hops,
        t.message_overhead,
        name=f"{size} chips of {t.name} (ring at its slowest axis: uneven placement)",
        op_overhead=t.op_overhead,
    )
    return dataclasses.replace(sub, notes=t.notes, runtime=t.runtime)


def _on_switch(t: Topology, size: int, stride: int) -> Topology:
    span = size * stride
    port = t.axis_bandwidth[0]
    for chips, bw in t.levels:
        if span <= chips:
            port = bw
            break
    return dataclasses.replace(
        t,
        name=f"{size} chips of {t.name}",
        chips=size,
        shape=(size,),
        axis_bandwidth=(port,),
        sled=0,
        pcie_bandwidth=0.0,
        levels=(),
        memo={},
    )


def _on_cluster(t: Topology, size: int, stride: int) -> Topology:
    m = t.part.chips
    if size * stride <= m:
        return group(t.part, size, stride)
    if stride >= m:
        if stride % m:
            raise FabricError(
                f"a group {stride} ranks apart does not align with the {m}-chip parts of "
                f"{t.name}; use a stride that is a multiple of {m} or a divisor of it"
            )
        local = Topology(name="one chip", kind="single", chips=1, shape=(1,))
        parts = size
    else:
        if m % stride:
            raise FabricError(
                f"a group {stride} ranks apart does not tile the {m}-chip parts of {t.name}"
            )
        per_part = m // stride
        if size % per_part:
            raise FabricError(
                f"a group of {size} chips {stride} apart puts {per_part} in each {m}-chip "
                f"part of {t.name}; choose a size that is a multiple of {per_part}"
            )
        local = group(t.part, per_part, stride)
        parts = size // per_part
    return dataclasses.replace(
        t,
        name=f"{size} chips of {t.name} ({parts} x {local.chips} over EFA)",
        chips=size,
        shape=(parts, local.chips),
        part=local,
        parts=parts,
        memo={},
    )
