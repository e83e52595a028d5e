"""Topologies as graphs of chips and directed links, built from the catalogue.

A :class:`Topology` holds flat arrays (one entry per directed link: source node, destination
node, bandwidth per direction in B/s, latency in s, tier) plus the routing rule of its kind:

``torus``
    Chips on a k-dimensional torus with wrap-around (a ring is a 1-D torus), two directed links
    per neighbour pair. Dimension-order routing, shortest way round each axis (halfway round,
    chips at even coordinates go one way and odd ones the other). trn1.32xlarge and
    trn2.48xlarge are 4x4; the Trn2 UltraServer is 4x4x4 whose third axis (rings across the four
    instances) has its own bandwidth.
``switch``
    Trn3 UltraServers: every chip has an up and a down link to a non-blocking NeuronSwitch-v1
    node (route: up, down), and links to its sled's PCIe switch (in the graph, not routed over,
    being ten times slower than the NeuronSwitch path in the model). One non-blocking switch
    level is an assumption: the Neuron docs' Trn3 page describes Gen2 as a first-level switch
    per 4-chip server and two second-level NeuronSwitch-v1 across servers (and Gen1 as 4
    servers of 16 chips, where the catalogue follows seed-001's 16 sleds of 4); no public
    figure says whether the second level is oversubscribed.
``cluster``
    N copies of a building block (instance or UltraServer) plus one non-blocking EFA fabric
    node: each chip has an EFA up and down link carrying its share of the system's EFA
    bandwidth. The arrays are built only when asked for (simulation); closed forms use the
    building block and the EFA link, so a million chips cost nothing.
``single``
    One chip, no links.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from trnlab import catalog
from trnlab._checks import number, short, whole

from ._params import FabricError, FabricParams, fabric_params

__all__ = ["NODE_KINDS", "TIER_NAMES", "Topology", "ring", "topology", "torus"]

TIER_NAMES = ("NeuronLink", "PCIe", "EFA")
NODE_KINDS = ("chip", "sled PCIe switch", "NeuronSwitch", "EFA fabric")
NEURONLINK, PCIE, EFA = 0, 1, 2


@dataclass(frozen=True, eq=False)
class Topology:
    """A fabric: chips, switch nodes and directed links.

    Attributes
    ----------
    name : str
        What it is (``"trn2.48xlarge (4x4 torus)"``).
    kind : str
        ``"single"``, ``"torus"``, ``"switch"`` or ``"cluster"``.
    chips : int
        Number of chips (participants of a collective over the whole system).
    shape : tuple of int
        Torus axes (``(4, 4)``); ``(chips,)`` for a switch; ``(parts, chips per part)`` for a
        cluster.
    axis_bandwidth : tuple of float
        Torus: B/s per direction of one link along each axis. Switch: ``(chip<->NeuronSwitch,)``.
    axis_latency : tuple of float
        Seconds per hop along each axis (or per switch hop).
    part : Topology or None
        A cluster's building block (one NeuronLink domain).
    parts : int
        Number of building blocks (1 unless a cluster).
    efa_bandwidth, efa_latency : float
        Per-chip EFA bandwidth per direction (B/s) and per-hop latency (s); 0 without EFA.
    message_overhead : float
        Fixed seconds per message before bytes flow (the software part of alpha).
    op_overhead : float
        Fixed seconds per collective operation on this fabric (launch and synchronisation),
        paid once whatever the algorithm; 0 for the hand-built rings and tori.
    sled : int
        Chips per PCIe sled (switch kind only; 0 when the switch has no sleds).
    pcie_bandwidth, pcie_latency : float
        Per-chip, per-direction sled PCIe bandwidth and hop latency (switch kind only).
    levels : tuple of (int, float)
        A tiered switch: for each level, the chips it spans and the per-chip bandwidth each
        way across it (empty for one non-blocking level).
    runtime : str
        The Neuron runtime generation whose algorithms ``"auto"`` picks (see
        :data:`trnlab.fabric.RUNTIMES`).
    """

    name: str
    kind: str
    chips: int
    shape: tuple[int, ...]
    axis_bandwidth: tuple[float, ...] = ()
    axis_latency: tuple[float, ...] = ()
    part: Topology | None = None
    parts: int = 1
    efa_bandwidth: float = 0.0
    efa_latency: float = 0.0
    message_overhead: float = 0.0
    op_overhead: float = 0.0
    sled: int = 0
    pcie_bandwidth: float = 0.0
    pcie_latency: float = 0.0
    levels: tuple[tuple[int, float], ...] = ()  # switch levels: (chips spanned, B/s per chip)
    runtime: str = "current"
    notes: tuple[str, ...] = field(default_factory=tuple)  # the model's assumptions, in words
    memo: dict = field(default_factory=dict, repr=False, compare=False)  # derived hop costs

    def __repr__(self) -> str:
        return f"Topology({self.name!r}, chips={self.chips:,}, kind={self.kind!r})"

    # Graph arrays --------------------------------------------------------------------------
    @cached_property
    def _arrays(self) -> dict[str, np.ndarray]:
        if self.kind == "single":
            z = np.zeros(0, np.int64)
            return {"src": z, "dst": z, "bw": np.zeros(0), "lat": np.zeros(0), "tier": z}
        if self.kind == "torus":
            return _torus_arrays(self)
        if self.kind == "switch":
            return _switch_arrays(self)
        return _cluster_arrays(self)

    @property
    def nodes(self) -> int:
        """Chips plus switch nodes (sled PCIe switches, NeuronSwitch, EFA fabric)."""
        if self.kind == "switch":
            return self.chips + (self.chips // self.sled if self.sled else 0) + 1
        if self.kind == "cluster":
            return self.parts * self.part.nodes + 1
        return self.chips

    @property
    def links(self) -> int:
        """Number of directed links."""
        return int(self._arrays["src"].size)

    @property
    def link_src(self) -> np.ndarray:
        return self._arrays["src"]

    @property
    def link_dst(self) -> np.ndarray:
        return self._arrays["dst"]

    @property
    def link_bandwidth(self) -> np.ndarray:
        """B/s per direction of each directed link."""
        return self._arrays["bw"]

    @property
    def link_latency(self) -> np.ndarray:
        return self._arrays["lat"]

    @property
    def link_tier(self) -> np.ndarray:
        """0 NeuronLink, 1 PCIe, 2 EFA (names in ``TIER_NAMES``)."""
        return self._arrays["tier"]

    @property
    def domain(self) -> int:
        """Chips in one NeuronLink domain (the whole system unless a cluster)."""
        return self.part.chips if self.kind == "cluster" else self.chips

    # Drawing --------------------------------------------------------------------------------
    def chip_nodes(self) -> np.ndarray:
        """Node index of each chip (they differ in a cluster of switched parts)."""
        c = np.arange(self.chips)
        if self.kind == "cluster":
            m = self.part.chips
            return (c // m) * self.part.nodes + c % m
        return c

    def node_kinds(self) -> np.ndarray:
        """Kind of each node, as indices into ``NODE_KINDS``."""
        if self.kind == "switch":
            sleds = self.chips // self.sled if self.sled else 0
            return np.concatenate([np.zeros(self.chips, np.int64), np.ones(sleds, np.int64), [2]])
        if self.kind == "cluster":
            return np.concatenate([np.tile(self.part.node_kinds(), self.parts), [3]])
        return np.zeros(self.chips, np.int64)

    def layout(self) -> np.ndarray:
        """Positions (nodes, 2) for drawing the graph.

        Tori: a grid per 4x4 instance, instances side by side along the UltraServer axis; a
        ring: a circle. Switch: chips on a circle (sleds contiguous), sled PCIe switches inside
        it, the NeuronSwitch in the middle. Cluster: the parts on a grid, the EFA fabric above.
        """
        if self.kind == "single":
            return np.zeros((1, 2))
        if self.kind == "torus":
            if len(self.shape) == 1:
                a = 2 * np.pi * np.arange(self.chips) / self.chips
                return np.column_stack([np.cos(a), np.sin(a)])
            c = np.array(np.unravel_index(np.arange(self.chips), self.shape), float).T
            x = c[:, 1].copy()
            if len(self.shape) > 2:  # the remaining axes lay whole planes side by side
                rest = np.ravel_multi_index(c[:, 2:].T.astype(np.int64), self.shape[2:])
                x += rest * (self.shape[1] + 1)
            return np.column_stack([x, -c[:, 0]])
        if self.kind == "switch":
            n, sleds = self.chips, (self.chips // self.sled if self.sled else 0)
            a = 2 * np.pi * (np.arange(n) + 0.5) / n
            chips = np.column_stack([np.cos(a), np.sin(a)])
            sa = 2 * np.pi * (np.arange(sleds) + 0.5) / max(sleds, 1)
            sled = 0.7 * np.column_stack([np.cos(sa), np.sin(sa)]).reshape(-1, 2)
            return np.vstack([chips, sled, [[0.0, 0.0]]])
        part = self.part.layout()
        lo, hi = part.min(axis=0), part.max(axis=0)
        size = np.maximum(hi - lo, 1.0)
        cols = int(np.ceil(np.sqrt(self.parts)))
        q = np.arange(self.parts)
        origin = np.column_stack([q % cols, -(q // cols)]) * (size * 1.3)
        pos = ((part - lo)[None, :, :] + origin[:, None, :]).reshape(-1, 2)
        top = [pos[:, 0].mean(), pos[:, 1].max() + size[1]]
        return np.vstack([pos, [top]])

    # Routing --------------------------------------------------------------------------------
    def _chip(self, i) -> int:
        if type(i) is int and 0 <= i < self.chips:
            return i
        return whole(
            i, f"chip (of the {self.chips} chips of {self.name})", 0, self.chips - 1, FabricError
        )

    def route(self, a: int, b: int) -> list[int]:
        """Directed link ids from chip ``a`` to chip ``b`` (empty when ``a == b``)."""
        a, b = self._chip(a), self._chip(b)
        if a == b:
            return []
        if self.kind == "torus":
            return _torus_route(self, a, b)
        if self.kind == "switch":
            return [2 * a, 2 * b + 1]  # up to the switch, down to b (first 2n links)
        if self.kind == "cluster":
            m = self.part.chips
            pa, pb = divmod(a, m), divmod(b, m)
            if pa[0] == pb[0]:
                off = pa[0] * self.part.links
                return [off + x for x in self.part.route(pa[1], pb[1])]
            base = self.parts * self.part.links
            return [base + 2 * a, base + 2 * b + 1]
        raise FabricError(f"{self.name} has one chip: there is nothing to route")

    def hop(self, a: int, b: int) -> tuple[float, float]:
        """(bottleneck bandwidth B/s, alpha s) of one message from ``a`` to ``b``.

        alpha = message overhead + the latencies of every link on the route (cut-through).
        """
        a, b = self._chip(a), self._chip(b)
        if self.kind == "cluster" and a // self.part.chips != b // self.part.chips:
            return self.efa_bandwidth, self.message_overhead + 2 * self.efa_latency
        if self.kind == "cluster":
            m = self.part.chips
            return self.part.hop(a % m, b % m)
        if self.kind == "switch":  # up to the NeuronSwitch and down: the same for every pair
            return self.axis_bandwidth[0], self.message_overhead + 2 * self.axis_latency[0]
        key = ("hop", a, b)
        if key not in self.memo:
            r = self.route(a, b)
            bw = self._arrays["bw"][r]
            lat = float(self._arrays["lat"][r].sum())
            self.memo[key] = (float(bw.min()), self.message_overhead + lat)
        return self.memo[key]

    def ring_order(self) -> np.ndarray:
        """A Hamiltonian ring of chips using neighbour links where the topology allows.

        Torus: the reflected (boustrophedon) Gray code over the axes, which closes through a
        wrap-around link when the first axis is even. Switch: 0..n-1. Cluster: each part's
        ring cut open, parts one after the other (one EFA hop between parts).
        """
        if self.kind == "torus":
            return _snake(self.shape)
        if self.kind == "cluster":
            local = self.part.ring_order()
            m = self.part.chips
            return (np.arange(self.parts)[:, None] * m + local[None, :]).ravel()
        return np.arange(self.chips)


# Builders -----------------------------------------------------------------------------------


#: The largest fabric modelled: AWS's "up to 1 million" chips in an UltraCluster.
MAX_TOPOLOGY_CHIPS = 1_000_000


def torus(
    shape: tuple[int, ...],
    bandwidth: float | tuple[float, ...],
    latency: float | tuple[float, ...] = 0.5e-6,
    message_overhead: float = 1.0e-6,
    name: str | None = None,
    op_overhead: float = 0.0,
) -> Topology:
    """A k-dimensional torus with wrap-around (a ring when ``shape`` has one axis).

    Parameters
    ----------
    shape : tuple of int
        Chips along each axis, each >= 2.
    bandwidth, latency : float or tuple of float
        Per-direction link bandwidth (B/s) and per-hop latency (s), one value or one per axis.
    message_overhead : float
        Seconds per message before its bytes flow.
    op_overhead : float
        Fixed seconds per collective operation (0: the pure alpha-beta model).
    """
    if not isinstance(shape, tuple | list) or not all(
        isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in shape
    ):
        raise FabricError(
            f"torus shape is a tuple of whole numbers such as (4, 4), not {short(shape)}"
        )
    shape = tuple(int(d) for d in shape)
    if math.prod(shape) > MAX_TOPOLOGY_CHIPS:
        raise FabricError(
            f"a {shape} torus has {math.prod(shape):,} chips; trnlab models fabrics of up to "
            f"{MAX_TOPOLOGY_CHIPS:,} chips (AWS's 'up to 1 million')"
        )
    if not shape or any(d < 2 for d in shape):
        raise FabricError(
            f"torus shape {shape} needs one or more axes of at least 2 chips "
            "(a single chip has no fabric: use topology('trn1.2xlarge'))"
        )
    k = len(shape)
    bw = _per_axis(bandwidth, k, "bandwidth")
    lat = _per_axis(latency, k, "latency")
    message_overhead = number(message_overhead, "message_overhead (s)", 0, None, error=FabricError)
    op_overhead = number(op_overhead, "op_overhead (s)", 0, None, error=FabricError)
    if not all(np.isfinite(bw)) or min(bw) <= 0:
        raise FabricError(f"link bandwidth {bw} B/s must be positive and finite")
    for what, v in (("latency", min(lat)), ("message_overhead", message_overhead),
                    ("op_overhead", op_overhead)):  # fmt: skip
        if not (np.isfinite(v) and 0 <= v < 1):
            raise FabricError(f"{what} = {v!r} s must be in [0, 1) s")
    label = "x".join(map(str, shape))
    return Topology(
        name=name or (f"ring of {shape[0]}" if k == 1 else f"{label} torus"),
        kind="torus",
        chips=int(np.prod(shape)),
        shape=shape,
        axis_bandwidth=bw,
        axis_latency=lat,
        message_overhead=message_overhead,
        op_overhead=op_overhead,
    )


def ring(
    n: int,
    bandwidth: float,
    latency: float = 0.5e-6,
    message_overhead: float = 1.0e-6,
    op_overhead: float = 0.0,
) -> Topology:
    """A ring of ``n`` chips (a 1-D torus): two directed links between neighbours.

    Parameters
    ----------
    n : int
        Chips, at least 2.
    bandwidth : float
        B/s per link and direction.
    latency, message_overhead : float
        Seconds per hop and per message (the two parts of alpha).
    op_overhead : float
        Fixed seconds per collective operation.

    Returns
    -------
    Topology
    """
    n = whole(n, "n (chips in the ring)", 2, MAX_TOPOLOGY_CHIPS, FabricError)
    return torus((n,), bandwidth, latency, message_overhead, op_overhead=op_overhead)


def _per_axis(value, k: int, what: str) -> tuple[float, ...]:
    """One number per axis (a single number is every axis's), each finite."""
    values = value if isinstance(value, tuple | list) else (value,) * k
    if len(values) != k:
        raise FabricError(f"{what} has {len(values)} values for a torus of {k} axes; give 1 or {k}")
    return tuple(number(v, f"{what} (per axis)", error=FabricError) for v in values)


def topology(system, params: FabricParams | None = None) -> Topology:
    """The fabric of a catalogue system, or of an UltraCluster.

    Parameters
    ----------
    system : str, System or Topology
        ``"trn1.32xlarge"``, ``"trn2.48xlarge"``, ``"trn2-ultraserver"``,
        ``"trn3-ultraserver-gen1"``, ``"trn3-ultraserver-gen2"``, a ``catalog.cluster(...)``,
        or a Topology (returned as it is).
    params : FabricParams, optional
        Latencies and conventions (assumptions; see :class:`FabricParams`).

    Notes
    -----
    Per-link bandwidth per direction = chip NeuronLink figure / links / 2 (both directions
    counted, an assumption in ``params``). trn1: 384 GB/s / 4 / 2 = 48 GB/s. trn2: the 1,024
    GB/s instance share / 4 / 2 = 128 GB/s on the torus axes, the 256 GB/s UltraServer share /
    2 links (ring of 4) / 2 = 64 GB/s on the third axis. trn3: 2.56 TB/s / 2 = 1.28 TB/s per
    direction into the NeuronSwitch; sled PCIe 256 GB/s bidirectional = 128 GB/s per direction.
    EFA: system bit/s / chips / 8 per chip, per direction.
    """
    params = fabric_params(params)
    if isinstance(system, Topology):
        return system
    if not isinstance(system, str | catalog.System):
        raise FabricError(
            f"system must be a catalogue system (a name such as 'trn2.48xlarge', a System or "
            f"catalog.cluster(...)) or a Topology, not {short(system)}"
        )
    sysobj = catalog.system(system) if isinstance(system, str) else system
    key = (sysobj.key, sysobj.chips, params)
    if key not in _BUILT:
        if len(_BUILT) > 64:
            _BUILT.clear()
        _BUILT[key] = _from_system(sysobj, params)
    return _BUILT[key]


_BUILT: dict = {}  # topologies already built, so repeated calls reuse their memoised hop costs


def _efa(sysobj, params: FabricParams) -> float:
    net = sysobj.network_bandwidth
    if net is None:
        raise FabricError(f"{sysobj} has no EFA bandwidth in the catalogue; cannot cluster it")
    per_chip = net / sysobj.chips / 8.0  # bit/s -> B/s per chip
    return per_chip / (2.0 if params.efa_counts_both_directions else 1.0)


def _scale_out_name(sysobj) -> str:
    return "EFA" if sysobj.chip.kind == "neuron" or "efa" in sysobj.fabric.lower() else "network"


def _from_system(sysobj, params: FabricParams) -> Topology:
    # Per link and direction: the chip figure / 2 when it counts both directions, times the
    # share of it a large collective achieves (calibrated).
    div = (2.0 if params.counts_both_directions else 1.0) / params.efficiency(
        sysobj.chip.kind, sysobj.chip
    )
    over = params.overhead
    lat_nl = params.neuronlink_latency
    timing = (
        f"{params.step * 1e6:g} us per step ({over * 1e6:g} us software + {lat_nl * 1e6:g} us "
        f"per hop, assumed split), {params.op * 1e6:g} us per collective (calibrated)"
    )
    if sysobj.kind == "ultracluster":
        part = _from_system(sysobj.part, params)
        efa = _efa(sysobj.part, params)
        net = _scale_out_name(sysobj.part)
        return Topology(
            notes=(
                *part.notes,
                f"{net}: {efa / 1e9:g} GB/s per chip each way (system Gbit/s / chips / 8), "
                f"{params.efa_step * 1e6:g} us per hop, {params.efa_op * 1e6:g} us per "
                "collective that crosses it; one non-blocking fabric (full bisection assumed)",
            ),
            name=f"{sysobj.parts:,} x {part.name} over {net}",
            kind="cluster",
            chips=sysobj.chips,
            shape=(sysobj.parts, part.chips),
            part=part,
            parts=sysobj.parts,
            efa_bandwidth=efa,
            efa_latency=params.efa_latency,
            message_overhead=over,
            op_overhead=params.efa_op,
            runtime=params.runtime,
        )
    topo = sysobj.topology
    chip = sysobj.chip
    if topo == "single":
        return Topology(name=f"{sysobj.key} (one chip)", kind="single", chips=1, shape=(1,))
    if topo in ("ring", "torus2d", "torus3d"):
        shape = tuple(int(d) for d in sysobj.figures["torus_shape"].value)
        links = int(chip.figures["neuronlink_links"].value)
        if "neuronlink_instance_bandwidth" in chip.figures:
            inst = float(chip.figures["neuronlink_instance_bandwidth"].value)
            ultra = float(chip.figures["neuronlink_ultraserver_bandwidth"].value)
        else:
            inst, ultra = float(chip.figures["neuronlink_bandwidth"].value), 0.0
        # 2 neighbours per axis: the 4 of the instance's 4x4 torus, the 2 of Inf2's ring
        bw = [inst / links / div] * min(len(shape), 2)
        if len(shape) == 3:
            bw.append(ultra / 2 / div)  # ring of 4 across instances: 2 neighbours
        t = torus(
            shape,
            tuple(bw),
            lat_nl,
            over,
            name=f"{sysobj.key} ({'x'.join(map(str, shape))} torus)"
            if len(shape) > 1
            else f"{sysobj.key} (ring of {shape[0]})",
            op_overhead=params.op,
        )
        note = (
            f"NeuronLink: {', '.join(f'{b / 1e9:.3g}' for b in bw)} GB/s per link each way "
            f"(chip figure / links / 2, direction convention assumed, x "
            f"{params.efficiency():.3g} achieved in large collectives, calibrated); {timing}"
        )
        return dataclasses.replace(t, notes=(note,), runtime=params.runtime)
    if topo == "switch":
        return _switch(sysobj, params, div, timing)
    raise FabricError(f"no fabric model for {sysobj} (topology {topo!r})")


def _switch(sysobj, params: FabricParams, div: float, timing: str) -> Topology:
    """A switched domain: Trn3's NeuronSwitch, or a GPU system's NVSwitch.

    Per chip and direction: the chip's scale-up figure / 2 (both directions counted). A
    system with ``switch_levels`` (Trn3 Gen2 as the Trn3 architecture page draws it) keeps
    each level's per-chip bandwidth; a group pays the slowest level it spans.
    """
    chip = sysobj.chip
    fig = chip.figures.get("neuronlink_bandwidth") or chip.figures.get("interconnect_bandwidth")
    if fig is None:
        raise FabricError(f"{chip} has no scale-up bandwidth in the catalogue")
    port = float(fig.value) / div
    levels: tuple[tuple[int, float], ...] = ()
    if "switch_levels" in sysobj.figures:
        spans = sysobj.figures["switch_levels"].value
        per_chip = sysobj.figures["switch_level_bandwidth"].value
        # stated per chip, bidirectional (the Trn3 architecture page's GB/s per chip)
        levels = tuple((int(n), float(b) / div) for n, b in zip(spans, per_chip, strict=True))
        port = min(b for _, b in levels)
    sled = int(sysobj.figures["chips_per_sled"].value) if "chips_per_sled" in sysobj.figures else 0
    pcie = (
        float(sysobj.figures["sled_pcie_bandwidth"].value) / 2.0  # stated bidirectional
        if "sled_pcie_bandwidth" in sysobj.figures
        else 0.0
    )
    switch = "NeuronSwitch-v1" if chip.kind == "neuron" else "NVSwitch"
    if chip.kind != "neuron":
        timing += " (the Neuron runtime's step and fixed costs, assumed for NCCL)"
    eff = params.efficiency(chip.kind, chip)
    if levels:
        how = ", ".join(f"{b / 1e9:.3g} GB/s within {n} chips" for n, b in levels)
        note = (
            f"{switch} in levels: {how} per chip each way (stated per chip, / 2, x {eff:.3g} "
            "achieved)"
        )
    else:
        note = (
            f"{switch}: {port / 1e9:.3g} GB/s per chip each way ({float(fig.value) / 1e12:g} "
            f"TB/s / 2, direction convention assumed, x {eff:.3g} achieved); one non-blocking "
            "switch level (assumed)"
        )
    return Topology(
        name=f"{sysobj.key} ({switch}, {sysobj.chips} chips)",
        kind="switch",
        chips=sysobj.chips,
        shape=(sysobj.chips,),
        axis_bandwidth=(port,),
        axis_latency=(params.neuronlink_latency,),
        message_overhead=params.overhead,
        op_overhead=params.op,
        sled=sled,
        pcie_bandwidth=pcie,
        pcie_latency=params.pcie_latency,
        levels=levels,
        notes=(f"{note}; {timing}",),
        runtime=params.runtime,
    )


# Arrays and routes --------------------------------------------------------------------------


def _torus_arrays(t: Topology) -> dict[str, np.ndarray]:
    shape = np.array(t.shape)
    k, n = len(t.shape), t.chips
    coords = np.array(np.unravel_index(np.arange(n), t.shape)).T  # (n, k)
    # link id = (chip * k + axis) * 2 + (0 for +, 1 for -); on an axis of 2 the - link is the
    # + link of the neighbour's pair, so both exist but routing only uses +.
    src = np.repeat(np.arange(n), 2 * k)
    dst = np.empty(2 * k * n, np.int64)
    bw = np.empty(2 * k * n)
    lat = np.empty(2 * k * n)
    for j in range(k):
        for s, step in enumerate((1, -1)):
            c = coords.copy()
            c[:, j] = (c[:, j] + step) % shape[j]
            ids = (np.arange(n) * k + j) * 2 + s
            dst[ids] = np.ravel_multi_index(c.T, t.shape)
            bw[ids] = t.axis_bandwidth[j]
            lat[ids] = t.axis_latency[j]
    return {"src": src, "dst": dst, "bw": bw, "lat": lat, "tier": np.zeros(src.size, np.int64)}


def _torus_route(t: Topology, a: int, b: int) -> list[int]:
    k = len(t.shape)
    ca = list(np.unravel_index(a, t.shape))
    cb = np.unravel_index(b, t.shape)
    out = []
    for j, d in enumerate(t.shape):
        delta = (int(cb[j]) - int(ca[j])) % d
        s, steps, move = (0, delta, 1) if delta <= d // 2 else (1, d - delta, -1)
        if d > 2 and 2 * delta == d and ca[j] % 2:
            # Halfway round: both ways are shortest. Odd coordinates go the other way, so
            # uniform traffic loads the two directions of a ring alike.
            s, steps, move = 1, delta, -1
        for _ in range(steps):
            chip = int(np.ravel_multi_index(ca, t.shape))
            out.append((chip * k + j) * 2 + s)
            ca[j] = (ca[j] + move) % d
    return out


def _switch_arrays(t: Topology) -> dict[str, np.ndarray]:
    if not t.sled:  # no sleds: only the links into the switch
        n = t.chips
        chip = np.arange(n)
        src = np.stack([chip, np.full(n, n)], 1).ravel()
        dst = np.stack([np.full(n, n), chip], 1).ravel()
        full = np.full(2 * n, 1.0)
        return {"src": src, "dst": dst, "bw": full * t.axis_bandwidth[0],
                "lat": full * t.axis_latency[0], "tier": np.full(2 * n, NEURONLINK)}  # fmt: skip
    n, sleds = t.chips, t.chips // t.sled
    ns = n + sleds  # the NeuronSwitch node; sled switches are n .. n+sleds-1
    chip = np.arange(n)
    sled_node = n + chip // t.sled
    src = np.concatenate([np.stack([chip, np.full(n, ns)], 1).ravel(),
                          np.stack([chip, sled_node], 1).ravel()])  # fmt: skip
    dst = np.concatenate([np.stack([np.full(n, ns), chip], 1).ravel(),
                          np.stack([sled_node, chip], 1).ravel()])  # fmt: skip
    bw = np.concatenate([np.full(2 * n, t.axis_bandwidth[0]), np.full(2 * n, t.pcie_bandwidth)])
    lat = np.concatenate([np.full(2 * n, t.axis_latency[0]), np.full(2 * n, t.pcie_latency)])
    tier = np.concatenate([np.full(2 * n, NEURONLINK), np.full(2 * n, PCIE)])
    return {"src": src, "dst": dst, "bw": bw, "lat": lat, "tier": tier}


def _cluster_arrays(t: Topology) -> dict[str, np.ndarray]:
    if t.chips > 200_000:
        raise FabricError(
            f"{t.name} has {t.chips:,} chips; trnlab builds the link graph only up to 200,000 "
            "chips. Use simulate=False (closed form), which is hierarchical and needs no graph."
        )
    p = t.part._arrays
    nodes, L = t.part.nodes, t.part.links
    off_n = np.repeat(np.arange(t.parts) * nodes, L)
    src = np.tile(p["src"], t.parts) + off_n
    dst = np.tile(p["dst"], t.parts) + off_n
    chips = np.arange(t.chips)
    node_of_chip = (chips // t.part.chips) * nodes + chips % t.part.chips
    efa = t.parts * nodes
    src = np.concatenate([src, np.stack([node_of_chip, np.full(t.chips, efa)], 1).ravel()])
    dst = np.concatenate([dst, np.stack([np.full(t.chips, efa), node_of_chip], 1).ravel()])
    bw = np.concatenate([np.tile(p["bw"], t.parts), np.full(2 * t.chips, t.efa_bandwidth)])
    lat = np.concatenate([np.tile(p["lat"], t.parts), np.full(2 * t.chips, t.efa_latency)])
    tier = np.concatenate([np.tile(p["tier"], t.parts), np.full(2 * t.chips, EFA)])
    return {"src": src, "dst": dst, "bw": bw, "lat": lat, "tier": tier}


def _snake(shape: tuple[int, ...]) -> np.ndarray:
    """Reflected mixed-radix Gray code: consecutive chips differ by one step on one axis."""
    order = [()]
    for d in reversed(shape):
        new = []
        for i in range(d):
            seq = order if i % 2 == 0 else order[::-1]
            new.extend((i, *c) for c in seq)
        order = new
    return np.array([np.ravel_multi_index(c, shape) for c in order], dtype=np.int64)
