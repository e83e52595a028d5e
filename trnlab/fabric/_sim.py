"""Chunk-level event simulation of a plan on a topology, with link contention (numba).

Each message becomes ready when its gate opens (see ``_plan.gates``), waits the message
overhead, and is cut into chunks. Chunks cross the links of the message's route in event-time
order; a link sends one chunk at a time, first come first served, so messages that share a link
queue and interleave. Links are cut-through: a chunk's head may enter the next link one link
latency after it started on the previous one, its tail no earlier than it left the previous
link. A contention-free message of m bytes over h hops therefore takes
``overhead + sum(latency) + m / min(bandwidth)``: exactly the alpha-beta cost.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._plan import Plan, gates
from ._topology import Topology

__all__ = ["simulate"]


@njit(cache=True)
def _less(t, k, seq, i, j):
    # Order: head time, then the message's step (a chip's earlier steps go first), then the
    # chunk index (round robin over the messages of one step), then release order.
    if t[i] != t[j]:
        return t[i] < t[j]
    if k[i] != k[j]:
        return k[i] < k[j]
    return seq[i] < seq[j]


@njit(cache=True)
def _swap(h_t, h_k, h_s, h_m, h_hop, h_tail, i, j):
    h_t[i], h_t[j] = h_t[j], h_t[i]
    h_k[i], h_k[j] = h_k[j], h_k[i]
    h_s[i], h_s[j] = h_s[j], h_s[i]
    h_m[i], h_m[j] = h_m[j], h_m[i]
    h_hop[i], h_hop[j] = h_hop[j], h_hop[i]
    h_tail[i], h_tail[j] = h_tail[j], h_tail[i]


@njit(cache=True)
def _sift_up(h_t, h_k, h_s, h_m, h_hop, h_tail, i):
    """Restore the event heap after an event was written at slot ``i``."""
    while i > 0:
        p = (i - 1) // 2
        if not _less(h_t, h_k, h_s, i, p):
            break
        _swap(h_t, h_k, h_s, h_m, h_hop, h_tail, i, p)
        i = p


@njit(cache=True)
def _sift_down(h_t, h_k, h_s, h_m, h_hop, h_tail, size):
    """Restore the event heap of ``size`` events after its root was replaced."""
    i = 0
    while True:
        a = 2 * i + 1
        if a >= size:
            break
        if a + 1 < size and _less(h_t, h_k, h_s, a + 1, a):
            a += 1
        if not _less(h_t, h_k, h_s, a, i):
            break
        _swap(h_t, h_k, h_s, h_m, h_hop, h_tail, i, a)
        i = a


@njit(cache=True)
def _simulate(
    bw, lat, pair_ptr, pair_links, msg_pair, msg_bytes, msg_step, into, need, wait, wait_ptr, wait_msgs,
    overhead, chunk_bytes, max_chunks, msg_start, msg_done, link_busy, link_bytes,
):  # fmt: skip
    n_msg = msg_pair.size
    left_gate = need.copy()
    gate_time = np.zeros(need.size)
    msg_left = np.zeros(n_msg, np.int64)
    msg_chunks = np.zeros(n_msg, np.int64)
    link_free = np.zeros(bw.size)
    cap = 1024
    h_t = np.empty(cap)  # head time (key)
    h_k = np.empty(cap, np.int64)  # step * 2**20 + chunk index (tie-break)
    h_s = np.empty(cap, np.int64)  # push sequence (tie-break: release order)
    h_m = np.empty(cap, np.int64)
    h_hop = np.empty(cap, np.int64)
    h_tail = np.empty(cap)
    size = 0
    seq = 0
    # Release the messages that wait for nothing, then run the event loop.
    stack = np.empty(n_msg, np.int64)
    n_stack = 0
    for m in range(n_msg):
        if wait[m] < 0:
            stack[n_stack] = m
            n_stack += 1
    release_time = 0.0
    makespan = 0.0
    while True:
        # Release pending messages at release_time (ready + overhead).
        for r in range(n_stack):
            m = stack[r]
            start = release_time + overhead
            msg_start[m] = start
            b = msg_bytes[m]
            c = int(np.ceil(b / chunk_bytes)) if b > 0 else 1
            c = max(1, min(c, max_chunks))
            msg_chunks[m] = c
            msg_left[m] = c
            for j in range(c):
                if size == cap:
                    cap *= 2
                    h_t = np.concatenate((h_t, np.empty(cap - size)))
                    h_k = np.concatenate((h_k, np.empty(cap - size, np.int64)))
                    h_s = np.concatenate((h_s, np.empty(cap - size, np.int64)))
                    h_m = np.concatenate((h_m, np.empty(cap - size, np.int64)))
                    h_hop = np.concatenate((h_hop, np.empty(cap - size, np.int64)))
                    h_tail = np.concatenate((h_tail, np.empty(cap - size)))
                i = size
                size += 1
                h_t[i] = start
                h_k[i] = msg_step[m] * 1048576 + j
                h_s[i] = seq
                seq += 1
                h_m[i] = m
                h_hop[i] = 0
                h_tail[i] = start
                _sift_up(h_t, h_k, h_s, h_m, h_hop, h_tail, i)
        n_stack = 0
        if size == 0:
            break
        # Pop the earliest chunk event.
        t_head, k, m, hop, t_tail = h_t[0], h_k[0], h_m[0], h_hop[0], h_tail[0]
        size -= 1
        if size > 0:
            h_t[0], h_k[0], h_s[0] = h_t[size], h_k[size], h_s[size]
            h_m[0], h_hop[0], h_tail[0] = h_m[size], h_hop[size], h_tail[size]
            _sift_down(h_t, h_k, h_s, h_m, h_hop, h_tail, size)
        p = msg_pair[m]
        nhops = pair_ptr[p + 1] - pair_ptr[p]
        csize = msg_bytes[m] / msg_chunks[m]
        if nhops == 0:
            t_arrive = t_head
        else:
            lk = pair_links[pair_ptr[p] + hop]
            s = max(t_head, link_free[lk])
            tx = csize / bw[lk]
            e = max(s + tx, t_tail)
            link_free[lk] = e
            link_busy[lk] += tx
            link_bytes[lk] += csize
            if hop + 1 < nhops:
                i = size
                if size == cap:
                    cap *= 2
                    h_t = np.concatenate((h_t, np.empty(cap - size)))
                    h_k = np.concatenate((h_k, np.empty(cap - size, np.int64)))
                    h_s = np.concatenate((h_s, np.empty(cap - size, np.int64)))
                    h_m = np.concatenate((h_m, np.empty(cap - size, np.int64)))
                    h_hop = np.concatenate((h_hop, np.empty(cap - size, np.int64)))
                    h_tail = np.concatenate((h_tail, np.empty(cap - size)))
                size += 1
                h_t[i] = s + lat[lk]
                h_k[i] = k
                h_s[i] = seq
                seq += 1
                h_m[i] = m
                h_hop[i] = hop + 1
                h_tail[i] = e + lat[lk]
                _sift_up(h_t, h_k, h_s, h_m, h_hop, h_tail, i)
                continue
            t_arrive = e + lat[lk]
        # The chunk has arrived at the destination.
        if t_arrive > msg_done[m]:
            msg_done[m] = t_arrive
        msg_left[m] -= 1
        if msg_left[m] == 0:
            if msg_done[m] > makespan:
                makespan = msg_done[m]
            g = into[m]
            if msg_done[m] > gate_time[g]:
                gate_time[g] = msg_done[m]
            left_gate[g] -= 1
            if left_gate[g] == 0:
                release_time = gate_time[g]
                for r in range(wait_ptr[g], wait_ptr[g + 1]):
                    stack[n_stack] = wait_msgs[r]
                    n_stack += 1
    return makespan


def _routes(topo: Topology, plan: Plan):
    """Route table per distinct (src, dst) pair, as CSR, and each message's pair index."""
    n = topo.chips
    keys, pair = np.unique(plan.src * n + plan.dst, return_inverse=True)
    ptr = np.zeros(keys.size + 1, np.int64)
    links: list[int] = []
    for i, key in enumerate(keys.tolist()):
        r = topo.route(*divmod(key, n))
        links.extend(r)
        ptr[i + 1] = len(links)
    return ptr, np.asarray(links, np.int64), pair.astype(np.int64)


def simulate(topo: Topology, plan: Plan, chunk_bytes: int, max_chunks: int):
    """Run the event simulation; returns (time, msg_start, msg_done, link_busy, link_bytes)."""
    bw = np.ascontiguousarray(topo.link_bandwidth, dtype=np.float64)
    lat = np.ascontiguousarray(topo.link_latency, dtype=np.float64)
    ptr, links, pair = _routes(topo, plan)
    into, need, wait, wptr, wmsgs = gates(plan)
    m = plan.messages
    start, done = np.zeros(m), np.zeros(m)
    busy, nbytes = np.zeros(bw.size), np.zeros(bw.size)
    t = _simulate(
        bw, lat, ptr, links, pair, plan.nbytes, plan.step, into, need, wait, wptr, wmsgs,
        float(topo.message_overhead), float(chunk_bytes), int(max_chunks),
        start, done, busy, nbytes,
    )  # fmt: skip
    return float(t), start, done, busy, nbytes
