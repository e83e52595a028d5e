"""A collective as a plan of messages, and the dependency gates the simulator needs.

A :class:`Plan` is a list of messages (source chip, destination chip, bytes, step, lane). Steps
order the messages of one chip: a chip starts its sends of step k once every message sent to it
in its latest earlier receiving step of the same lane has arrived (a chip-level barrier, not a
global one). Lanes are independent streams through the same chips, such as the two directions
of a bidirectional ring. This is
how ring, tree and torus algorithms are written in the literature (Thakur, Rabenseifner and
Gropp 2005) and how the closed forms count steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Plan", "concat", "gates"]


@dataclass(frozen=True, eq=False)
class Plan:
    """Messages of a collective: ``src[i] -> dst[i]`` carries ``nbytes[i]`` at ``step[i]``."""

    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    step: np.ndarray
    lane: np.ndarray

    @property
    def messages(self) -> int:
        return int(self.src.size)

    @property
    def steps(self) -> int:
        return int(self.step.max()) + 1 if self.step.size else 0

    def shifted(self, by: int) -> Plan:
        return Plan(self.src, self.dst, self.nbytes, self.step + by, self.lane)


def empty() -> Plan:
    z = np.zeros(0, np.int64)
    return Plan(z, z, np.zeros(0), z, z)


def make(src, dst, nbytes, step, lane=0) -> Plan:
    """A plan from broadcastable arrays (flattened, int64 chips and steps, float64 bytes)."""
    src, dst, nbytes, step, lane = np.broadcast_arrays(
        np.asarray(src), np.asarray(dst), np.asarray(nbytes, float), np.asarray(step),
        np.asarray(lane),
    )  # fmt: skip
    return Plan(
        src.ravel().astype(np.int64),
        dst.ravel().astype(np.int64),
        nbytes.ravel().astype(np.float64),
        step.ravel().astype(np.int64),
        lane.ravel().astype(np.int64),
    )


def concat(*plans: Plan, sequential: bool = True) -> Plan:
    """Join plans; ``sequential`` renumbers steps so each plan follows the previous one."""
    out, offset = [], 0
    for p in plans:
        if p.messages == 0:
            continue
        out.append(p.shifted(offset) if sequential else p)
        if sequential:
            offset += p.steps
    if not out:
        return empty()
    fields = ("src", "dst", "nbytes", "step", "lane")
    return Plan(*(np.concatenate([getattr(p, f) for p in out]) for f in fields))


def gates(plan: Plan):
    """Dependency gates of a plan, as flat arrays for the simulator.

    A gate is one (chip, lane, step) at which messages arrive. Returns ``into`` (the gate each
    message completes), ``need`` (messages per gate), ``wait`` (the gate each message waits
    for, -1 if none) and the CSR ``(wait_ptr, wait_msgs)`` from each gate to its waiters.
    """
    width = int(plan.step.max()) + 2 if plan.messages else 1
    lanes = int(plan.lane.max()) + 1 if plan.messages else 1
    key_in = (plan.dst * lanes + plan.lane) * width + plan.step
    keys, into = np.unique(key_in, return_inverse=True)
    need = np.bincount(into, minlength=keys.size).astype(np.int64)
    # The gate at the sender, same lane, with the largest step below the message's step.
    owner = plan.src * lanes + plan.lane
    q = owner * width + plan.step
    pos = np.searchsorted(keys, q, side="left") - 1
    ok = pos >= 0
    ok[ok] = keys[pos[ok]] // width == owner[ok]
    wait = np.where(ok, pos, -1).astype(np.int64)
    waiting = np.flatnonzero(wait >= 0)
    order = waiting[np.argsort(wait[waiting], kind="stable")]
    counts = np.bincount(wait[waiting], minlength=keys.size)
    ptr = np.zeros(keys.size + 1, np.int64)
    np.cumsum(counts, out=ptr[1:])
    return into.astype(np.int64), need, wait, ptr, order.astype(np.int64)
