"""A collective as a plan of messages, and the dependency gates the simulator needs.

A :class:`Plan` is a list of messages (source chip, destination chip, bytes, step, lane). Steps
order the messages of one chip: a chip starts its sends of step k once every message sent to it
in its latest earlier receiving step of the same lane has arrived (a chip-level barrier, not a
global one), and its sends of its latest earlier sending step of that lane have left (each lane
is one in-order DMA queue). Lanes are independent streams through the same chips, such as the
two directions of a bidirectional ring. This is
how ring, tree and torus algorithms are written in the literature (Thakur, Rabenseifner and
Gropp 2005) and how the closed forms count steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Plan", "concat", "gates", "send_queues"]


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


def _waiting(plan: Plan, by_dst: bool):
    """Group the messages by (chip, lane, step), the chip being the receiver (``by_dst``) or
    the sender, and find for each message the group of its sender with the largest step below
    the message's: ``(into, need, wait, wait_ptr, wait_msgs)`` as described in :func:`gates`."""
    width = int(plan.step.max()) + 2 if plan.messages else 1
    lanes = int(plan.lane.max()) + 1 if plan.messages else 1
    chip = plan.dst if by_dst else plan.src
    key_in = (chip * lanes + plan.lane) * width + plan.step
    owner = plan.src * lanes + plan.lane
    q = owner * width + plan.step
    span = (int(max(plan.src.max(), plan.dst.max())) + 1) * lanes * width if plan.messages else 1
    if span <= 4 * plan.messages + 4096:
        # Dense keys (rings, trees, meshes): rank them by counting, no sort.
        present = np.zeros(span, bool)
        present[key_in] = True
        rank = np.cumsum(present) - 1
        into = rank[key_in]
        keys_n = int(rank[-1]) + 1
        below = np.maximum.accumulate(np.where(present, np.arange(span), -1))
        prev = np.where(q > 0, below[np.maximum(q - 1, 0)], -1)
        ok = (prev >= 0) & (prev // width == owner)
        wait = np.where(ok, rank[np.maximum(prev, 0)], -1)
    else:
        keys, into = np.unique(key_in, return_inverse=True)
        keys_n = keys.size
        pos = np.searchsorted(keys, q, side="left") - 1
        ok = pos >= 0
        ok[ok] = keys[pos[ok]] // width == owner[ok]
        wait = np.where(ok, pos, -1)
    into, wait = into.astype(np.int64).ravel(), wait.astype(np.int64)
    need = np.bincount(into, minlength=keys_n).astype(np.int64)
    waiting = np.flatnonzero(wait >= 0)
    order = waiting[np.argsort(wait[waiting], kind="stable")]
    counts = np.bincount(wait[waiting], minlength=keys_n)
    ptr = np.zeros(keys_n + 1, np.int64)
    np.cumsum(counts, out=ptr[1:])
    return into, need, wait, ptr, order.astype(np.int64)


def gates(plan: Plan):
    """Dependency gates of a plan, as flat arrays for the simulator.

    A gate is one (chip, lane, step) at which messages arrive. Returns ``into`` (the gate each
    message completes), ``need`` (messages per gate), ``wait`` (the gate each message waits
    for, -1 if none) and the CSR ``(wait_ptr, wait_msgs)`` from each gate to its waiters.
    """
    return _waiting(plan, by_dst=True)


def send_queues(plan: Plan):
    """The in-order send queue of each (chip, lane), as flat arrays for the simulator.

    A queue entry is one (chip, lane, step) of sends; a message starts only after every send of
    its chip's previous entry in that lane has left (a DMA queue runs its transfers in order).
    Returns ``out`` (the entry each message belongs to), ``need`` (messages per entry),
    ``wait`` (the entry each message waits for, -1 if none) and the CSR from entries to waiters.
    """
    return _waiting(plan, by_dst=False)
