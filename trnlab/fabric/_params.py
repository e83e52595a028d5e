"""Model parameters of the fabric: fixed costs, latencies and conventions.

Every default comes from the catalogue's ``[collectives]`` group (``catalog.table("collectives")``):
the per-step latencies the Neuron runtime docs give for a NeuronLink step (1-2 us) and an EFA
hop (~15 us), and the fixed cost per collective operation calibrated from Neuron's published
``nccom-test`` results. What no source gives (how a step latency splits between software and
the wire, a NeuronSwitch hop, whether a per-chip bandwidth counts both directions) is an
*assumption*, kept here so a learner can see and change it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

__all__ = ["RUNTIMES", "FabricError", "FabricParams", "collective_figure"]

#: Neuron runtime generations with their own collective behaviour: ``"current"`` (the runtime
#: of SDK 2.24 and later, whose nccom-test runs fit ``op_overhead``) and ``"2023"`` (SDK 2.10,
#: runtime 2.13, April 2023: rings only inside an instance, since the mesh "All-to-All
#: All-Reduce" arrived with SDK 2.11 in June 2023; its own fixed cost ``op_overhead_2023``).
RUNTIMES = ("current", "2023")


class FabricError(ValueError):
    """A fabric request the model cannot answer; the message says what to do instead."""


@cache
def collective_figure(name: str) -> float:
    """A figure of the catalogue's ``[collectives]`` group, as a float (seconds or bytes)."""
    from trnlab import catalog

    return float(catalog.table("collectives")[name].value)


def _seconds(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise FabricError(f"{name} = {value!r}: give a number of seconds")
    if not 0 <= value < 1:
        raise FabricError(
            f"{name} = {value!r} s is outside [0, 1) s; fabric latencies are micro- to "
            "milliseconds (leave it None to use the catalogue's figure)"
        )


@dataclass(frozen=True)
class FabricParams:
    """Fixed costs, latencies and conventions of the alpha-beta model (all overridable).

    A step of an algorithm costs ``alpha + m / B``; a whole collective adds one fixed cost
    per operation. ``None`` means "the catalogue's figure".

    Attributes
    ----------
    step_latency : float or None
        alpha of one NeuronLink step between neighbours (software + one hop). Default: the
        catalogue's ``neuronlink_step_latency``, 1.5 us, the middle of the "about 1-2 us" per
        hop the Neuron runtime docs give for Ring/KangaRing.
    neuronlink_latency : float
        The wire part of a step: seconds per NeuronLink hop (chip to chip, or chip to
        NeuronSwitch), added for every extra hop of a routed message. **Assumption:** 0.5 us.
        The per-message software cost is ``step_latency - neuronlink_latency``.
    message_overhead : float or None
        Override the per-message software cost directly (seconds).
    pcie_latency : float
        Seconds per hop through a Trn3 sled's PCIe switch. **Assumption:** 0.5 us.
    efa_step_latency : float or None
        alpha of one EFA hop, chip to chip across systems. Default: the catalogue's
        ``efa_step_latency``, 15 us ("~15 us" per hop, Neuron runtime docs).
    op_overhead : float or None
        Fixed seconds per collective operation (launch and synchronisation), paid once
        whatever the algorithm. Default: the catalogue's ``op_overhead``, calibrated on the
        small-message times of Neuron's published nccom-test runs (see docs/validation.md).
    efa_op_overhead : float or None
        Fixed seconds per collective that crosses EFA. Default: ``op_overhead`` plus one EFA
        step (**assumption**: no current published multi-node small-message run).
    link_efficiency : float or None
        Share of a NeuronLink (or NeuronSwitch port) bandwidth a large collective achieves, in
        (0, 1]. Default: the catalogue's ``neuronlink_efficiency``, calibrated on the largest
        published intra-instance nccom-test run (Trainium2, 512 MiB). GPU systems use the
        catalogue's ``nvlink_efficiency``.
    counts_both_directions : bool
        True (default) reads a per-chip NeuronLink bandwidth as the sum over both directions
        of all its links, as NVLink figures are counted; per-link, per-direction bandwidth is
        then ``chip figure / links / 2``. **Assumption:** the Neuron docs do not say.
    efa_counts_both_directions : bool
        False (default) reads an EFA figure in Gbit/s as per direction, as NIC ratings are.
    runtime : {"current", "2023"}
        The Neuron runtime generation (:data:`RUNTIMES`): its algorithm set (``"2023"``: rings
        only inside an instance, hierarchical across instances) and its fixed cost per
        collective (``op_overhead`` or ``op_overhead_2023``, each calibrated on its own runs).
    chunk_bytes : int
        The simulator splits each message into chunks of about this size (at most
        ``max_chunks``) so messages sharing a link interleave.
    max_chunks : int
        Upper limit of chunks per message (bounds the event count of large simulations).
    """

    step_latency: float | None = None
    neuronlink_latency: float = 0.5e-6
    message_overhead: float | None = None
    pcie_latency: float = 0.5e-6
    efa_step_latency: float | None = None
    op_overhead: float | None = None
    efa_op_overhead: float | None = None
    link_efficiency: float | None = None
    counts_both_directions: bool = True
    efa_counts_both_directions: bool = False
    runtime: str = "current"
    chunk_bytes: int = 1 << 20
    max_chunks: int = 8

    def __post_init__(self) -> None:
        for name in ("neuronlink_latency", "pcie_latency"):
            _seconds(name, getattr(self, name))
        for name in (
            "step_latency",
            "message_overhead",
            "efa_step_latency",
            "op_overhead",
            "efa_op_overhead",
        ):
            if getattr(self, name) is not None:
                _seconds(name, getattr(self, name))
        if self.message_overhead is None and self.step < self.neuronlink_latency:
            raise FabricError(
                f"step_latency {self.step * 1e6:g} us is below one hop's "
                f"neuronlink_latency {self.neuronlink_latency * 1e6:g} us; a step is software "
                "plus at least one hop"
            )
        if self.efa_step < self.overhead:
            raise FabricError(
                f"efa_step_latency {self.efa_step * 1e6:g} us is below the per-message "
                f"software cost {self.overhead * 1e6:g} us"
            )
        if self.runtime not in RUNTIMES:
            raise FabricError(
                f"runtime = {self.runtime!r}: trnlab models the Neuron runtime generations "
                f"{', '.join(RUNTIMES)} ('2023' is SDK 2.10's, before the mesh algorithm)"
            )
        e = self.link_efficiency
        if e is not None and (
            isinstance(e, bool) or not isinstance(e, int | float) or not 0 < e <= 1
        ):
            raise FabricError(
                f"link_efficiency = {e!r}: a share of the link bandwidth is in (0, 1]"
            )
        for name in ("chunk_bytes", "max_chunks"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise FabricError(f"{name} = {v!r} must be a whole number >= 1")

    # Resolved figures ------------------------------------------------------------------------
    @property
    def step(self) -> float:
        """alpha of one NeuronLink step (s)."""
        if self.step_latency is not None:
            return float(self.step_latency)
        return collective_figure("neuronlink_step_latency")

    @property
    def overhead(self) -> float:
        """Per-message software cost (s): a step less its one hop."""
        if self.message_overhead is not None:
            return float(self.message_overhead)
        return self.step - self.neuronlink_latency

    @property
    def efa_step(self) -> float:
        """alpha of one EFA hop, chip to chip (s)."""
        if self.efa_step_latency is not None:
            return float(self.efa_step_latency)
        return collective_figure("efa_step_latency")

    @property
    def efa_latency(self) -> float:
        """One EFA link (chip to fabric, or fabric to chip): half of a hop less the software."""
        return (self.efa_step - self.overhead) / 2

    @property
    def op(self) -> float:
        """Fixed cost per collective inside a NeuronLink domain (s), of the runtime generation."""
        if self.op_overhead is not None:
            return float(self.op_overhead)
        return collective_figure("op_overhead" if self.runtime == "current" else "op_overhead_2023")

    def efficiency(self, kind: str = "neuron", chip=None) -> float:
        """Achieved share of scale-up link bandwidth.

        ``link_efficiency`` when set; else the chip's own ``scaleup_efficiency`` (a GPU's
        NVLink share as NCCL achieves it) when the catalogue has one; else the calibrated
        ``neuronlink_efficiency`` for Neuron chips (``kind="neuron"``) or the
        ``nvlink_efficiency`` assumption for GPUs.
        """
        if self.link_efficiency is not None:
            return float(self.link_efficiency)
        if chip is not None and "scaleup_efficiency" in chip.figures:
            return float(chip.figures["scaleup_efficiency"].value)
        name = "neuronlink_efficiency" if kind == "neuron" else "nvlink_efficiency"
        return collective_figure(name)

    @property
    def efa_op(self) -> float:
        """Fixed cost per collective that crosses EFA (s)."""
        if self.efa_op_overhead is not None:
            return float(self.efa_op_overhead)
        return self.op + self.efa_step
