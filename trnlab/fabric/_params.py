"""Model parameters of the fabric that no source gives: latencies and conventions.

Everything here is an *assumption*, kept apart from the catalogue's sourced figures so a learner
can see (and change) what the model guesses. Bandwidths come from the catalogue; these knobs say
how to read them and what a message costs before its bytes flow.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FabricError", "FabricParams"]


class FabricError(ValueError):
    """A fabric request the model cannot answer; the message says what to do instead."""


@dataclass(frozen=True)
class FabricParams:
    """Latency and convention parameters of the alpha-beta model (all overridable).

    Attributes
    ----------
    message_overhead : float or None
        Fixed cost in seconds before a message's bytes start to flow (the software part of
        alpha). ``None`` (default) reads the DMA set-up cost of the chip's NeuronCore from the
        catalogue (``cores.vN.dma_setup``, 1.3 us from the NKI DMA guide). Using a DMA set-up
        cost as the per-message collective overhead is itself an assumption.
    neuronlink_latency : float
        Seconds per NeuronLink hop (chip to chip, or chip to NeuronSwitch). **Assumption:**
        0.5 us; no public source gives it.
    pcie_latency : float
        Seconds per hop through a Trn3 sled's PCIe switch. **Assumption:** 0.5 us.
    efa_latency : float
        Seconds per EFA hop (NIC to the non-blocking EFA fabric, or back). **Assumption:** 5 us
        each way, so about 10 us chip to chip, the order of RDMA fabrics; not from a source.
    counts_both_directions : bool
        True (default) reads a per-chip NeuronLink bandwidth as the sum over both directions
        of all its links, as NVLink figures are counted; per-link, per-direction bandwidth is
        then ``chip figure / links / 2``. **Assumption:** the Neuron docs do not say.
        False reads it as per direction.
    efa_counts_both_directions : bool
        False (default) reads an EFA figure in Gbit/s as per direction, as NIC ratings are.
    chunk_bytes : int
        The simulator splits each message into chunks of about this size (at most
        ``max_chunks``) so messages sharing a link interleave; it does not change the time of
        a contention-free message (links are cut-through).
    max_chunks : int
        Upper limit of chunks per message (bounds the event count of large simulations).
    """

    message_overhead: float | None = None
    neuronlink_latency: float = 0.5e-6
    pcie_latency: float = 0.5e-6
    efa_latency: float = 5e-6
    counts_both_directions: bool = True
    efa_counts_both_directions: bool = False
    chunk_bytes: int = 1 << 20
    max_chunks: int = 8

    def __post_init__(self) -> None:
        for name in ("neuronlink_latency", "pcie_latency", "efa_latency"):
            v = getattr(self, name)
            if not (v >= 0 and v < 1):
                raise FabricError(
                    f"{name} = {v!r} s is outside [0, 1) s; a link latency is a few microseconds"
                )
        if self.message_overhead is not None and not (0 <= self.message_overhead < 1):
            raise FabricError(
                f"message_overhead = {self.message_overhead!r} s is outside [0, 1) s; "
                "leave it None to use the catalogue's DMA set-up cost"
            )
        if self.chunk_bytes < 1 or self.max_chunks < 1:
            raise FabricError(
                f"chunk_bytes = {self.chunk_bytes} and max_chunks = {self.max_chunks} must be >= 1"
            )
