"""Bisection bandwidth: what crosses the narrowest cut of a fabric into two halves.

An all-to-all sends S/n bytes from every chip to every other, so the n/2 chips on one side of
any balanced cut send (n/2)(n/2)(S/n) = nS/4 bytes across it, each way. No schedule can beat
nS/4 divided by the bandwidth of the narrowest such cut (the bisection bound; Leighton,
"Introduction to Parallel Algorithms and Architectures", 1992, section 1.3; "How to Scale Your
Model", the networking chapter). On a torus that cut grows more slowly than the chip count; on
a non-blocking switch it is half the chips' ports, so the switch is never bisection-bound.
"""

from __future__ import annotations

from trnlab._checks import number

from ._params import FabricError, FabricParams
from ._topology import Topology, topology

__all__ = ["all_to_all_bound", "bisection_bandwidth"]


def bisection_bandwidth(system, params: FabricParams | None = None) -> float:
    """Bytes per second, each way, across the narrowest cut of the chips into two halves.

    Parameters
    ----------
    system : str, System or Topology
        As for :func:`trnlab.fabric.topology`.
    params : FabricParams, optional
        Model assumptions (the direction convention changes the link bandwidths).

    Returns
    -------
    float
        Torus: min over axes j of 2 (n / d_j) B_j (cutting an axis of d_j >= 3 crosses each of
        its n / d_j rings twice, at the middle and at the wrap-around; an axis of 2 is crossed
        once, (n / 2) B_j). Switch (non-blocking, assumed): (n / 2) x the chip's port. Cluster:
        the cut between parts, (n / 2) x the per-chip EFA bandwidth (non-blocking EFA,
        assumed; exact for an even number of parts).

    Raises
    ------
    FabricError
        For one chip (nothing to cut).

    Examples
    --------
    >>> from trnlab import fabric
    >>> fabric.bisection_bandwidth("trn2-ultraserver") / 1e12  # 2 x 16 rings x 64 GB/s
    2.048
    """
    t = topology(system, params)
    n = t.chips
    if n < 2:
        raise FabricError(f"{t.name} has one chip: there is no cut to measure")
    if t.kind == "torus":
        cuts = [
            (n / 2 if d == 2 else 2 * n / d) * b
            for d, b in zip(t.shape, t.axis_bandwidth, strict=True)
        ]
        return float(min(cuts))
    if t.kind == "switch":
        return float(n / 2 * t.axis_bandwidth[0])
    if t.kind == "cluster":
        if t.parts == 1:
            return bisection_bandwidth(t.part)
        return float(n / 2 * t.efa_bandwidth)
    raise FabricError(f"no bisection rule for a {t.kind} fabric ({t.name})")


def all_to_all_bound(nbytes: float, system, params: FabricParams | None = None) -> float:
    """Seconds no all-to-all of ``nbytes`` (the whole send buffer per chip) can beat for
    crossing the bisection: (n S / 4) / bisection bandwidth.

    Parameters
    ----------
    nbytes : float
        Send buffer per chip (nccl-tests size): each chip sends nbytes / n to each peer.
    system : str, System or Topology
        Where it runs.
    params : FabricParams, optional
        Model assumptions.

    Examples
    --------
    >>> from trnlab import fabric
    >>> round(fabric.all_to_all_bound(2**30, "trn2-ultraserver") * 1e3, 2)  # ms: S / 128 GB/s
    8.39
    """
    t: Topology = topology(system, params)
    nbytes = number(nbytes, "nbytes (bytes per chip)", 0, None, error=FabricError)
    return float(t.chips * nbytes / 4 / bisection_bandwidth(t))
