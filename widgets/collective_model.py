"""The model behind CollectiveExplorer: one collective on one fabric, swept, drawn and animated.

Plain Python over :mod:`trnlab.fabric` (no ipywidgets, no plotly), so it is tested without a
browser. The view only calls :meth:`CollectiveModel.set` and reads :meth:`sweep`,
:meth:`regimes`, :meth:`drawing`, :meth:`animation`, :meth:`all_to_all` and :meth:`summary`.

What is computed how, so that a control change answers quickly:

- the message-size sweep uses the closed forms only (about 100 sizes x every algorithm that
  fits, a few milliseconds, cached per system / parts / collective);
- the drawn case (one size) is simulated message by message when it makes at most
  ``SIM_MESSAGES`` messages (milliseconds to a tenth of a second; cached), otherwise it falls
  back to the closed form and the drawing shows no link load;
- the ring animation simulates a ring of 2 to 8 chips (microseconds; cached).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from trnlab import catalog, fabric
from trnlab._checks import choose, short, whole
from trnlab.fabric import CollectiveResult, FabricError, FabricParams, Topology
from trnlab.units import binary, si

from ._errors import SettingError

__all__ = [
    "DRAW_SIZES",
    "PARTS",
    "SIM_MESSAGES",
    "AllToAll",
    "CollectiveModel",
    "Drawing",
    "Regimes",
    "RingAnimation",
    "Sweep",
    "duration",
    "rate",
]

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
DRAW_SIZES = tuple(1 << k for k in range(10, 34))  # 1 KiB .. 8 GiB, the drawn case
SWEEP_SIZES = np.round(
    2.0 ** np.arange(10, 33.001, 0.25)
)  # whole bytes, 1 KiB .. 8 GiB, four points per octave
PARTS = (1, 2, 4)  # the system alone, or an UltraCluster of 2 or 4 over EFA
RING_CHIPS = tuple(range(2, 9))
SIM_MESSAGES = 100_000  # larger drawn cases use the closed form (no link load)
COMPARE = ("trn2-ultraserver", "trn3-ultraserver-gen1", "trn3-ultraserver-gen2")
_PATH_POINTS = 9  # points per drawn link (straight, or an arc for wrap-around links)


def duration(seconds: float) -> str:
    """``3.4e-5 -> "34.0 us"``: seconds with the prefix a reader expects."""
    s = float(seconds)
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s * 1e9:.3g} ns" if s > 0 else "0 s"


def rate(bps: float) -> str:
    """``6.25e7 -> "62.5 MB/s"``: bytes per second with a decimal prefix, three digits, so that
    a latency-bound collective's small bus bandwidth does not print as 0.0 GB/s."""
    return si(float(bps), "B/s")


# Cached computations (module level: shared by every model object) ----------------------------


def _system(key: str, parts: int):
    return catalog.cluster(key, parts) if parts > 1 else catalog.system(key)


@lru_cache(maxsize=64)
def _topology(key: str, parts: int, params: FabricParams) -> Topology:
    return fabric.topology(_system(key, parts), params)


@lru_cache(maxsize=256)
def _sweep(key: str, parts: int, op: str, params: FabricParams) -> dict:
    topo = _topology(key, parts, params)
    out = {}
    for name in fabric.algorithms(op, topo, params):
        est = [fabric.closed_form(op, int(s), topo, name, params) for s in SWEEP_SIZES]
        out[name] = (np.array([e.time for e in est]), est[-1].kind)
    # auto, as trnlab.fabric chooses: what the Neuron runtime picks at each size
    picks = [fabric.runtime_choice(op, int(s), topo) for s in SWEEP_SIZES]
    out["auto"] = (
        np.array([out[p][0][i] for i, p in enumerate(picks)]),
        "the Neuron runtime's choice at each size",
    )
    out["auto picks"] = picks
    return out


@lru_cache(maxsize=256)
def _drawn(key: str, parts: int, op: str, alg: str, nbytes: int, params: FabricParams):
    topo = _topology(key, parts, params)
    closed = fabric.collective(op, nbytes, topo, alg, simulate=False, params=params)
    from trnlab.fabric._algorithms import algorithm as strategy  # message count, no plan built

    count = 0 if closed.time == 0 else strategy(closed.algorithm).messages(op, topo)
    if count == 0:
        return closed, "nothing moves, so there is nothing to simulate"
    if count > SIM_MESSAGES:
        return closed, (
            f"{count:,} messages is too many to simulate while you wait (limit "
            f"{SIM_MESSAGES:,}); the time is the closed form and link load is not drawn"
        )
    try:
        return fabric.collective(op, nbytes, topo, closed.algorithm, True, params), ""
    except FabricError as err:
        return closed, f"not simulated: {err}"


@lru_cache(maxsize=64)
def _ring_run(n: int, nbytes: int, bw: float, alpha_hop: float, overhead: float):
    ring = fabric.ring(n, bw, latency=alpha_hop, message_overhead=overhead)
    return fabric.collective("all_reduce", nbytes, ring, "ring", simulate=True)


@lru_cache(maxsize=16)
def _compare(params: FabricParams) -> dict:
    out = {}
    for key in COMPARE:
        topo = _topology(key, 1, params)
        runs = [fabric.collective("all_to_all", int(s), topo, "auto", params=params)
                for s in SWEEP_SIZES]  # fmt: skip
        out[key] = (np.array([r.time for r in runs]), runs[-1].algorithm)
    return out


# Results -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sweep:
    """Closed-form time and bus bandwidth against message size, per algorithm.

    ``time[name]`` and ``busbw[name]`` are arrays over ``sizes``; ``kind[name]`` says whether
    the closed form is exact, an estimate or a lower bound; ``auto_picks`` names the algorithm
    ``auto`` chooses at each size (the Neuron runtime's size bands: mesh, RDH, rings).
    """

    sizes: np.ndarray
    time: dict[str, np.ndarray]
    busbw: dict[str, np.ndarray]
    kind: dict[str, str]
    auto_picks: list[str]
    chosen: str


@dataclass(frozen=True)
class Regimes:
    """Where one algorithm stops being latency-bound.

    With t(S) = latency + S x per_byte (the alpha-beta form), the two terms are equal at
    ``crossover`` = latency / per_byte, where bus bandwidth reaches half of ``peak_busbw``.
    ``latency`` is t at 1 byte; ``crossover`` is found on the closed form itself (t = 2 x
    latency), so it also holds where the form is not a straight line. ``algorithm`` is the
    algorithm described: the chosen one, or under ``auto`` the one auto picks at the drawn
    size (auto switches algorithm with size, so its own curve has no single fixed cost).
    """

    latency: float
    per_byte: float
    crossover: float
    peak_busbw: float
    algorithm: str = ""


@dataclass(frozen=True)
class Drawing:
    """The fabric as lines and points, with each link's load.

    ``node_xy`` (nodes, 2) and ``node_kind`` (indices into ``fabric.NODE_KINDS``); one row per
    undirected link: ``path`` (links, points, 2) to draw, ``tier`` (0 NeuronLink, 1 PCIe,
    2 EFA), ``ends`` (links, 2) node pairs, ``load`` the busier direction's utilisation
    (busy time / collective time, 0..1) and ``bytes_each_way`` (links, 2). ``load`` is None
    when the case was not simulated (``why`` says why).
    """

    node_xy: np.ndarray
    node_kind: np.ndarray
    chips: int
    path: np.ndarray
    ends: np.ndarray
    tier: np.ndarray
    load: np.ndarray | None
    bytes_each_way: np.ndarray | None
    why: str


@dataclass(frozen=True)
class RingAnimation:
    """A ring all-reduce of ``nbytes`` on ``n`` chips, step by step.

    ``held[k, chip, chunk]`` counts the chips whose data chunk ``chunk`` on ``chip`` already
    sums after ``k`` steps (n means fully reduced); ``sends[k-1]`` lists (src, dst, chunk) of
    step k; ``step_end[k]`` is the simulated time when step k's last message lands
    (``step_end[0]`` = 0); ``closed_form_end[k]`` = k (alpha + S / (n B)).
    """

    n: int
    nbytes: int
    bandwidth: float
    alpha: float
    held: np.ndarray
    sends: list[list[tuple[int, int, int]]]
    step_end: np.ndarray
    closed_form_end: np.ndarray
    result: CollectiveResult

    @property
    def steps(self) -> int:
        return 2 * (self.n - 1)

    def phase(self, k: int) -> str:
        if k == 0:
            return "start: every chip holds its own data"
        return "reduce-scatter" if k <= self.n - 1 else "all-gather"


@dataclass(frozen=True)
class AllToAll:
    """All-to-all on the Trn2 UltraServer torus against the Trn3 NeuronSwitch UltraServers.

    ``time[key]`` over ``sizes`` (closed form of the best algorithm, ``algorithm[key]``);
    ``bound[key]`` the bisection bound nS/4 / bisection bandwidth; ``bisection[key]`` in B/s.
    """

    sizes: np.ndarray
    time: dict[str, np.ndarray]
    algorithm: dict[str, str]
    bound: dict[str, np.ndarray]
    bisection: dict[str, float]
    chips: dict[str, int]


# The model -----------------------------------------------------------------------------------


class CollectiveModel:
    """State of the collective explorer: fabric, collective, algorithm, drawn size, animation.

    Parameters
    ----------
    system : str
        A multi-chip catalogue system (``"trn2.48xlarge"``, ``"trn3-ultraserver-gen2"``...).
    parts : int
        1 for the system alone; 2 or 4 for an UltraCluster of that many joined by EFA.
    op : str
        ``"all_reduce"``, ``"reduce_scatter"``, ``"all_gather"``, ``"all_to_all"`` or
        ``"broadcast"``.
    algorithm : str
        ``"auto"`` or one of :meth:`algorithms`. A change of system or collective keeps it if
        it still fits, else returns to ``"auto"`` (and :attr:`note` says so).
    nbytes : int
        The drawn case's size, a power of two from 1 KiB to 8 GiB (nccl-tests convention).
    ring_chips : int
        Chips (2 to 8) of the ring all-reduce animation, which uses the system's ring hop.
    step : int
        Animation step, 0 (before the first) to 2 (ring_chips - 1).
    params : FabricParams, optional
        Latency and direction assumptions of the fabric model.
    """

    SETTINGS = ("system", "parts", "op", "algorithm", "nbytes", "ring_chips", "step")

    def __init__(
        self,
        system: str = "trn2.48xlarge",
        parts: int = 1,
        op: str = "all_reduce",
        algorithm: str = "auto",
        nbytes: int = 64 * MiB,
        ring_chips: int = 4,
        step: int = 0,
        params: FabricParams | None = None,
    ) -> None:
        self.params = params or FabricParams()
        self.system, self.parts, self.op, self.algorithm = "trn2.48xlarge", 1, "all_reduce", "auto"
        self.nbytes, self.ring_chips, self.step = 64 * MiB, 4, 0
        self.note = ""
        self.set(system=system, parts=parts, op=op, algorithm=algorithm, nbytes=nbytes,
                 ring_chips=ring_chips, step=step)  # fmt: skip

    # Options ----------------------------------------------------------------------------------
    @staticmethod
    def systems() -> list[tuple[str, str]]:
        """(label, key) of the catalogue systems with more than one chip: the label is the
        system's name and its chips, the value its catalogue key."""
        return [(f"{s.name}, {s.chips} chips", s.key) for s in catalog.systems() if s.chips > 1]

    @staticmethod
    def joinable() -> list[str]:
        """Keys of the systems whose copies can be joined into an UltraCluster: those with a
        scale-out (EFA) bandwidth in the catalogue."""
        return [s.key for s in catalog.systems() if s.chips > 1 and s.network_bandwidth is not None]

    def parts_options(self, system: str | None = None) -> list[tuple[str, int]]:
        """(label, parts) the Copies control offers for ``system`` (default: the current one):
        the system alone, and clusters of it only where the catalogue has its EFA bandwidth."""
        key = self.system if system is None else system
        if key not in self.joinable():
            return [("alone", 1)]
        sysobj = catalog.system(key)
        net = "EFA" if sysobj.chip.kind == "neuron" or "efa" in sysobj.fabric.lower() else (
            "the network"
        )  # fmt: skip
        return [("alone", 1), *[(f"{p} joined by {net}", p) for p in PARTS[1:]]]

    def algorithms(self, op: str | None = None) -> list[str]:
        """``"auto"`` and the algorithms that can run ``op`` on the current fabric."""
        return ["auto", *fabric.algorithms(op or self.op, self.topology, self.params)]

    @property
    def topology(self) -> Topology:
        return _topology(self.system, self.parts, self.params)

    # State ------------------------------------------------------------------------------------
    def set(self, **changes) -> CollectiveModel:
        """Change any of :attr:`SETTINGS`; all-or-nothing.

        Raises
        ------
        SettingError
            An unknown setting or value, or an algorithm that cannot run the collective on the
            fabric (the message names those that can); the state is left as it was.
        """
        unknown = set(changes) - set(self.SETTINGS)
        if unknown:
            raise SettingError(f"CollectiveModel has no setting {sorted(unknown)}; it has "
                               f"{', '.join(self.SETTINGS)}")  # fmt: skip
        new = {k: changes.get(k, getattr(self, k)) for k in self.SETTINGS}
        keys = [k for _, k in self.systems()]
        new["system"] = choose(new["system"], keys, "multi-chip system", SettingError)
        for name, allowed, what in (
            ("parts", PARTS, f"choose {PARTS} (1 = the system alone, more = an UltraCluster over EFA)"),
            ("nbytes", DRAW_SIZES, f"the drawn size is a power of two from 1 KiB ({KiB}) to 8 GiB ({8 * GiB})"),
            ("ring_chips", RING_CHIPS, "the animation draws 2 to 8 chips"),
        ):  # fmt: skip
            v = new[name]
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v not in allowed:
                raise SettingError(f"{name} = {short(v)}: {what}")
            new[name] = int(v)
        try:
            new["op"] = fabric.collective(new["op"], 0, "trn2.48xlarge").op  # normalise names
        except FabricError as err:
            raise SettingError(str(err)) from None
        note = ""
        if new["parts"] > 1 and new["system"] not in self.joinable():
            name = catalog.system(new["system"]).name
            if "parts" in changes:
                raise SettingError(
                    f"parts = {new['parts']}: {name} has no EFA bandwidth in the catalogue, so "
                    f"copies of it cannot be joined into an UltraCluster; use parts = 1, or "
                    f"one of {', '.join(self.joinable())}"
                )
            note = (f"{name} has no EFA bandwidth in the catalogue, so copies went back to "
                    "1 (the system alone)")  # fmt: skip
            new["parts"] = 1
        try:
            topo = _topology(new["system"], new["parts"], self.params)
        except (FabricError, catalog.CatalogError) as err:  # a system the fabric cannot model
            raise SettingError(f"system = {new['system']}: {err}") from None
        fits = ["auto", *fabric.algorithms(new["op"], topo, self.params)]
        if "algorithm" in changes:
            alg = new["algorithm"]
            if isinstance(alg, str) and alg.strip().lower() in set(fabric.ALGORITHMS) - set(fits):
                raise SettingError(f"algorithm {alg!r} cannot run {new['op']} on {topo.name}; "
                                   f"choose from {', '.join(fits)}")  # fmt: skip
            new["algorithm"] = choose(
                alg, fits, f"algorithm for {new['op']} on {topo.name}", SettingError
            )
        elif new["algorithm"] not in fits:
            note = (note + "; " if note else "") + (
                f"{new['algorithm']} does not run {new['op']} on {topo.name}, so the "
                "algorithm went back to auto"
            )
            new["algorithm"] = "auto"
        steps = 2 * (new["ring_chips"] - 1)
        if "step" in changes:
            new["step"] = whole(
                new["step"],
                f"step (a ring all-reduce on {new['ring_chips']} chips has steps 0 to {steps})",
                0,
                steps,
                SettingError,
            )
        elif new["step"] > steps:
            note = (note + "; " if note else "") + (
                f"the animation went back to its last step, {steps}, for a ring of "
                f"{new['ring_chips']} chips"
            )
            new["step"] = steps
        for k, v in new.items():
            setattr(self, k, v)
        self.note = note
        return self

    # Results ----------------------------------------------------------------------------------
    def sweep(self) -> Sweep:
        """Closed-form time and bus bandwidth from 1 KiB to 8 GiB for every fitting algorithm."""
        raw = _sweep(self.system, self.parts, self.op, self.params)
        n = self.topology.chips
        f = fabric.bus_factor(self.op, n)
        names = [k for k in raw if k != "auto picks"]
        time = {k: raw[k][0] for k in names}
        busbw = {k: SWEEP_SIZES * f / time[k] for k in names}
        kind = {k: raw[k][1] for k in names}
        return Sweep(SWEEP_SIZES, time, busbw, kind, raw["auto picks"], self.algorithm)

    def regime_algorithm(self) -> str:
        """The algorithm :meth:`regimes` describes: the chosen one, or under ``auto`` the one
        auto picks (the Neuron runtime's choice) at the drawn size."""
        if self.algorithm != "auto":
            return self.algorithm
        return fabric.runtime_choice(self.op, self.nbytes, self.topology)

    def _time(self, nbytes: float, alg: str) -> float:
        return fabric.closed_form(self.op, int(nbytes), self.topology, alg, self.params).time

    def regimes(self) -> Regimes:
        """Latency, per-byte cost and the latency/bandwidth crossover of one algorithm: the
        chosen one, or under ``auto`` the one auto picks at the drawn size (auto's own curve
        changes algorithm with size: at 1 byte it is the mesh, whose fixed cost is not that of
        the ring it may run at the drawn size)."""
        alg = self.regime_algorithm()
        key = ("regimes", self.system, self.parts, self.op, alg, self.params)
        if key not in _REGIMES:
            lat = self._time(1, alg)
            big = float(SWEEP_SIZES[-1])
            per_byte = (self._time(big, alg) - lat) / big
            lo, hi = 1.0, 2.0**40
            for _ in range(60):  # bisection on log size: t(S) = 2 t(1 byte)
                mid = np.sqrt(lo * hi)
                lo, hi = (mid, hi) if self._time(mid, alg) < 2 * lat else (lo, mid)
            peak = big * fabric.bus_factor(self.op, self.topology.chips) / self._time(big, alg)
            _REGIMES[key] = Regimes(lat, per_byte, float(hi), float(peak), alg)
        return _REGIMES[key]

    def result(self) -> tuple[CollectiveResult, str]:
        """The drawn case: simulated when small enough, else the closed form and why."""
        return _drawn(self.system, self.parts, self.op, self.algorithm, self.nbytes, self.params)

    def drawing(self) -> Drawing:
        """Nodes and links of the fabric, each link with the drawn case's load."""
        res, why = self.result()
        key = ("drawing", self.system, self.parts, self.params)
        if key not in _GEOMETRY:
            _GEOMETRY[key] = _geometry(self.topology)
        xy, kinds, ends, path, tier, pair = _GEOMETRY[key]
        load = each = None
        if res.link_utilisation is not None:
            load = np.zeros(len(ends))
            np.maximum.at(load, pair[:, 0], res.link_utilisation)
            each = np.zeros((len(ends), 2))
            np.add.at(each, (pair[:, 0], pair[:, 1]), res.link_bytes)
        return Drawing(xy, kinds, self.topology.chips, path, ends, tier, load, each, why)

    def ring_hop(self) -> tuple[float, float]:
        """(B, alpha) of one hop of the system's ring: the animation's link."""
        topo = self.topology.part if self.topology.kind == "cluster" else self.topology
        o = topo.ring_order()
        return topo.hop(int(o[0]), int(o[1]))

    def animation(self) -> RingAnimation:
        """The ring all-reduce on :attr:`ring_chips` chips with the system's ring hop."""
        n, S = self.ring_chips, self.nbytes
        bw, alpha = self.ring_hop()
        over = self.topology.message_overhead
        res = _ring_run(n, S, bw, alpha - over, over)
        return _animate(n, S, bw, alpha, res)

    def all_to_all(self) -> AllToAll:
        """All-to-all on the Trn2 UltraServer (torus) and the Trn3 UltraServers (switch)."""
        raw = _compare(self.params)
        time = {k: v[0] for k, v in raw.items()}
        bis = {k: fabric.bisection_bandwidth(_topology(k, 1, self.params)) for k in COMPARE}
        chips = {k: _topology(k, 1, self.params).chips for k in COMPARE}
        bound = {k: chips[k] * SWEEP_SIZES / 4 / bis[k] for k in COMPARE}
        return AllToAll(SWEEP_SIZES, time, {k: v[1] for k, v in raw.items()}, bound, bis, chips)

    def all_to_all_at(self, nbytes: int | None = None) -> dict[str, CollectiveResult]:
        """Closed-form all-to-all of ``nbytes`` (default: the drawn size) on each compared
        system."""
        S = self.nbytes if nbytes is None else nbytes
        return {k: fabric.collective("all_to_all", S, _topology(k, 1, self.params),
                                     params=self.params) for k in COMPARE}  # fmt: skip

    # Text --------------------------------------------------------------------------------------
    def summary(self) -> str:
        """Sentences of numbers: the drawn case, the regimes, the load, the crossover."""
        res, why = self.result()
        topo, reg = self.topology, self.regimes()
        how = "simulated" if res.simulated else "closed form"
        parts = [
            f"{self.op.replace('_', '-')} of {binary(self.nbytes)} on {topo.name}"
            f"{'' if 'chips' in topo.name else f' ({topo.chips:,} chips)'} with {res.algorithm}: {duration(res.time)} ({how}), "
            f"bus bandwidth {rate(res.busbw)}."
        ]
        if res.simulated and res.closed_form.time > 0:
            gap = res.time / res.closed_form.time - 1
            word = {"exact": "exact", "estimate": "an estimate", "bound": "a lower bound"}
            formula = res.closed_form.formula
            if formula.startswith("T_op + "):  # name the fixed cost the formula starts with
                formula += f" (T_op: the fixed cost of one operation, {duration(topo.op_overhead)})"
            parts.append(
                f"The closed form {formula} gives {duration(res.closed_form.time)}"
                f" ({word[res.closed_form.kind]}; the simulation is {gap:+.1%} from it)."
            )
        if reg.latency > 0:
            side = "latency-bound" if self.nbytes < reg.crossover else "bandwidth-bound"
            whose = (
                f"For {reg.algorithm}, auto's pick at {binary(self.nbytes)}, below"
                if self.algorithm == "auto"
                else f"For {reg.algorithm}, below"
            )
            parts.append(
                f"{whose} about {binary(reg.crossover)} the fixed cost of "
                f"{duration(reg.latency)} dominates (latency-bound); above it bytes do "
                f"(bandwidth-bound, bus bandwidth towards {rate(reg.peak_busbw)}). "
                f"{binary(self.nbytes)} is {side}."
            )
        if res.link_utilisation is not None and res.link_utilisation.size:
            u = res.link_utilisation
            parts.append(
                f"Links: busiest {u.max():.0%} busy, mean {u.mean():.0%}; "
                f"{np.count_nonzero(res.link_bytes == 0)} of {u.size} directed links idle."
            )
        elif why:
            parts.append(f"Link load not drawn: {why}.")
        if self.note:
            parts.append(self.note[0].upper() + self.note[1:] + ".")
        return " ".join(parts)

    def animation_summary(self) -> str:
        a = self.animation()
        k, n = self.step, a.n
        piece = binary(a.nbytes / n)
        if k == 0:
            return (
                f"Ring all-reduce of {binary(a.nbytes)} on {n} chips, cut into {n} chunks of "
                f"{piece}; {a.steps} steps of alpha + S/(nB) = {duration(a.alpha)} + "
                f"{piece} / {rate(a.bandwidth)}. Press play or move the step slider."
            )
        done = int((a.held[k] == n).sum())
        return (
            f"Step {k} of {a.steps} ({a.phase(k)}): every chip sends one chunk of {piece} to "
            f"the next chip. Simulated time {duration(a.step_end[k])} (closed form "
            f"{duration(a.closed_form_end[k])}); {done} of {n * n} chunk copies fully reduced."
        )

    def all_to_all_summary(self) -> str:
        at = self.all_to_all_at()
        a, b = at["trn2-ultraserver"], at["trn3-ultraserver-gen1"]
        bound = fabric.all_to_all_bound(self.nbytes, a.topology)
        return (
            f"All-to-all of {binary(self.nbytes)} per chip over 64 chips: Trn2 UltraServer "
            f"(4x4x4 torus, {a.algorithm}) {duration(a.time)}, no faster than its bisection "
            f"bound {duration(bound)}; Trn3 Gen1 (NeuronSwitch, {b.algorithm}) "
            f"{duration(b.time)}, {a.time / b.time:,.1f}x faster. Per chip the Trn3 link is "
            f"2x the Trn2's, the rest is topology: on the switch every pair is one hop and the "
            f"limit is each chip's own port; Gen2's 144 chips take "
            f"{duration(at['trn3-ultraserver-gen2'].time)}."
        )


_REGIMES: dict = {}
_GEOMETRY: dict = {}


def _geometry(t: Topology):
    """Undirected links of ``t`` with drawing paths; ``pair[i] = (edge, direction)`` for each
    directed link i. Wrap-around and cross-instance links bend so they do not hide others."""
    xy = t.layout()
    kinds = t.node_kinds()
    if t.links == 0:
        z = np.zeros((0, 2), np.int64)
        return xy, kinds, z, np.zeros((0, _PATH_POINTS, 2)), np.zeros(0, np.int64), z
    src, dst = t.link_src, t.link_dst
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    keys, edge = np.unique(lo * t.nodes + hi, return_inverse=True)
    ends = np.column_stack(divmod(keys, t.nodes))
    pair = np.column_stack([edge, (src > dst).astype(np.int64)])
    tier = np.zeros(len(keys), np.int64)
    tier[edge] = t.link_tier
    p, q = xy[ends[:, 0]], xy[ends[:, 1]]
    d = q - p
    length = np.hypot(d[:, 0], d[:, 1])
    unit = 1.0 if t.kind in ("torus", "cluster") and len(t.shape) > 1 else np.inf
    bend = np.where((length > 1.01 * unit) & (tier == 0), 0.18 * length, 0.0)
    normal = np.column_stack([-d[:, 1], d[:, 0]]) / np.maximum(length, 1e-12)[:, None]
    s = np.linspace(0, 1, _PATH_POINTS)[None, :, None]
    path = p[:, None, :] + s * d[:, None, :]
    path = path + (4 * s * (1 - s)) * (bend[:, None, None] * normal[:, None, :])
    return xy, kinds, ends, path, tier, pair


def _animate(n: int, S: int, bw: float, alpha: float, res: CollectiveResult) -> RingAnimation:
    steps = 2 * (n - 1)
    held = np.ones((steps + 1, n, n), np.int64)
    sends: list[list[tuple[int, int, int]]] = []
    for k in range(steps):
        now = held[k].copy()
        out = []
        for i in range(n):
            # Reduce-scatter step k: chip i passes chunk (i - k) mod n on, and the next chip
            # adds it to its own; after n - 1 steps chip c holds chunk c + 1 complete.
            # All-gather step j: chip i passes the complete chunk (i + 1 - j) mod n on.
            j = k - (n - 1)
            chunk = (i - k) % n if k < n - 1 else (i + 1 - j) % n
            nxt = (i + 1) % n
            out.append((i, nxt, chunk))
            if k < n - 1:
                now[nxt, chunk] = held[k, i, chunk] + held[k, nxt, chunk]
            else:
                now[nxt, chunk] = n
        held[k + 1] = now
        sends.append(out)
    sch = res.schedule
    step_end = np.zeros(steps + 1)
    for k in range(steps):
        step_end[k + 1] = sch.finish[sch.step == k].max()
    closed = np.arange(steps + 1) * (alpha + S / (n * bw))  # Thakur et al. 2005: one step
    return RingAnimation(n, S, bw, alpha, held, sends, step_end, closed, res)
