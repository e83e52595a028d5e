"""Flow-level event simulation of a plan on a topology: links shared max-min fairly (numba).

Each message becomes ready when its gate opens (see ``_plan.gates``), waits the message
overhead, and then flows along its route as a fluid: at every moment the messages in flight
share each link's bandwidth max-min fairly (progressive filling: every flow gets the largest
rate it can have without taking it from a flow that has less; Bertsekas and Gallager, *Data
Networks*, 2nd ed. 1992, section 6.5.2). Rates are recomputed whenever a message starts or
finishes, for the flows that share links with it (directly or through other flows). A message
of m bytes has left its source once its bytes have drained at those rates, and arrives one
route latency (the sum of its links' latencies) later.

Why a fluid and not whole messages: DMA traffic on NeuronLink and on EFA is cut into small
packets that the links interleave (the Neuron runtime docs divide a collective's tensors into
chunks that are transferred across ranks; a link arbitrates packet by packet), so two messages
on one link each get about half of it, and a message crossing several links streams through
them instead of waiting at each for whole messages queued ahead. The packet-level limit of that
interleaving is the fluid; max-min fairness is the standard model of how fair arbitration
shares it (SimGrid's flow-level network model, validated against packet-level simulation:
Velho, Schnorr, Casanova and Legrand, ACM TOMACS 23(4), 2013). What the fluid leaves out:
per-packet header bytes (folded into the links' achieved share) and arbitration that is fair
per input port rather than per flow.

Consequences the tests check: a contention-free message of m bytes over h hops takes
``overhead + sum(latency) + m / min(bandwidth)``, exactly the alpha-beta cost; no simulation is
faster than its busiest link's bytes; and where every flow of an exchange crosses links carrying
the same number of equal flows (a direct all-to-all on a torus of equal axes), all flows drain
together at the busiest link's rate.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._plan import Plan, gates, send_queues
from ._topology import Topology

__all__ = ["simulate"]

_START, _DRAIN = 0, 1
_TOL = 1e-9  # events within this relative time of each other are handled together


@njit(cache=True)
def _less(h_t, h_kind, h_id, i, j):
    if h_t[i] != h_t[j]:
        return h_t[i] < h_t[j]
    if h_kind[i] != h_kind[j]:
        return h_kind[i] < h_kind[j]
    return h_id[i] < h_id[j]


@njit(cache=True)
def _swap(h_t, h_kind, h_id, h_ver, i, j):
    h_t[i], h_t[j] = h_t[j], h_t[i]
    h_kind[i], h_kind[j] = h_kind[j], h_kind[i]
    h_id[i], h_id[j] = h_id[j], h_id[i]
    h_ver[i], h_ver[j] = h_ver[j], h_ver[i]


@njit(cache=True)
def _sift_up(h_t, h_kind, h_id, h_ver, i):
    while i > 0:
        p = (i - 1) // 2
        if not _less(h_t, h_kind, h_id, i, p):
            break
        _swap(h_t, h_kind, h_id, h_ver, i, p)
        i = p


@njit(cache=True)
def _sift_down(h_t, h_kind, h_id, h_ver, i, size):
    while True:
        a = 2 * i + 1
        if a >= size:
            break
        if a + 1 < size and _less(h_t, h_kind, h_id, a + 1, a):
            a += 1
        if not _less(h_t, h_kind, h_id, a, i):
            break
        _swap(h_t, h_kind, h_id, h_ver, i, a)
        i = a


@njit(cache=True)
def _grow(h_t, h_kind, h_id, h_ver, cap):
    """The event heap's arrays extended to ``cap`` entries (contents kept)."""
    n = cap - h_t.size
    return (
        np.concatenate((h_t, np.empty(n))),
        np.concatenate((h_kind, np.empty(n, np.int64))),
        np.concatenate((h_id, np.empty(n, np.int64))),
        np.concatenate((h_ver, np.empty(n, np.int64))),
    )


@njit(cache=True)
def _release(g, t, delay, g_time, g_left, ptr, msgs, ready, blockers, freed, n_free):
    """One message of group g (a receive gate or a send-queue entry) is done at t. When it is
    the group's last, its waiters may go ``delay`` after the group's latest; those with nothing
    else to wait for are appended to ``freed``. Returns the new count of freed messages."""
    g_time[g] = max(g_time[g], t)
    g_left[g] -= 1
    if g_left[g] == 0:
        for r in range(ptr[g], ptr[g + 1]):
            w = msgs[r]
            ready[w] = max(ready[w], g_time[g] + delay)
            blockers[w] -= 1
            if blockers[w] == 0:
                freed[n_free] = w
                n_free += 1
    return n_free


@njit(cache=True)
def _add_links(m, inc_ptr, inc_link, l_stamp, update, comp_l, nl):
    """Append message m's links not yet in this update's component; returns the new count."""
    for i in range(inc_ptr[m], inc_ptr[m + 1]):
        lk = inc_link[i]
        if l_stamp[lk] != update:
            l_stamp[lk] = update
            comp_l[nl] = lk
            nl += 1
    return nl


@njit(cache=True)
def _simulate(
    bw, lat, inc_ptr, inc_link, link_ptr, msg_bytes, into, need, wait, wait_ptr, wait_msgs,
    out, out_need, out_wait, out_ptr, out_msgs, overhead, msg_start, msg_done,
):  # fmt: skip
    n_msg = msg_bytes.size
    n_link = bw.size
    # Route latency of each message (sum over its links).
    route_lat = np.zeros(n_msg)
    for m in range(n_msg):
        for i in range(inc_ptr[m], inc_ptr[m + 1]):
            route_lat[m] += lat[inc_link[i]]
    # Active flows per link: link l's incidences sit in slots link_ptr[l] .. + link_cnt[l].
    link_cnt = np.zeros(n_link, np.int64)
    slot_inc = np.empty(max(link_ptr[n_link], 1), np.int64)
    inc_slot = np.empty(max(inc_ptr[n_msg], 1), np.int64)
    inc_msg = np.empty(max(inc_ptr[n_msg], 1), np.int64)
    for m in range(n_msg):
        for i in range(inc_ptr[m], inc_ptr[m + 1]):
            inc_msg[i] = m
    left_gate = need.copy()
    gate_time = np.zeros(need.size)
    left_out = out_need.copy()
    out_time = np.zeros(out_need.size)
    # A message starts once its receive gate has opened and its send queue's previous entry
    # has left: ``blockers`` counts what it still waits for, ``ready`` the latest of them.
    # The overhead (the message's software cost) runs once its receives have landed, while
    # earlier sends of its queue may still be on the wire: the queue holds back only its bytes.
    blockers = np.zeros(n_msg, np.int64)
    ready = np.full(n_msg, overhead)
    for m in range(n_msg):
        blockers[m] = (wait[m] >= 0) + (out_wait[m] >= 0)
    rem = np.zeros(n_msg)
    rate = np.zeros(n_msg)
    t_upd = np.zeros(n_msg)
    ver = np.zeros(n_msg, np.int64)
    active = np.zeros(n_msg, np.bool_)
    n_active = 0
    # Scratch for one rate update: the connected flows and links, stamped per update.
    f_stamp = np.full(n_msg, -1, np.int64)
    l_stamp = np.full(n_link, -1, np.int64)
    comp_f = np.empty(n_msg, np.int64)
    comp_l = np.empty(n_link, np.int64)
    frozen = np.zeros(n_msg, np.bool_)
    res = np.zeros(n_link)
    unf = np.zeros(n_link, np.int64)
    seeds = np.empty(n_msg, np.int64)
    # Event heap: (time, kind, message, version); drains whose version is stale are skipped.
    cap = 1024
    h_t = np.empty(cap)
    h_kind = np.empty(cap, np.int64)
    h_id = np.empty(cap, np.int64)
    h_ver = np.empty(cap, np.int64)
    size = 0
    for m in range(n_msg):
        if blockers[m] == 0:
            if size == cap:
                cap *= 2
                h_t, h_kind, h_id, h_ver = _grow(h_t, h_kind, h_id, h_ver, cap)
            h_t[size], h_kind[size], h_id[size], h_ver[size] = overhead, _START, m, 0
            _sift_up(h_t, h_kind, h_id, h_ver, size)
            size += 1
    makespan = 0.0
    update = 0
    batch = np.empty(n_msg, np.int64)
    freed = np.empty(n_msg, np.int64)
    gone = np.zeros(n_msg)  # when each message's last byte left its source
    while size > 0:
        # Pop every valid event within _TOL of the earliest one.
        t = h_t[0]
        limit = t + _TOL * abs(t)
        n_seed = 0
        n_batch = 0
        while size > 0 and h_t[0] <= limit:
            kind, m, v, te = h_kind[0], h_id[0], h_ver[0], h_t[0]
            size -= 1
            if size > 0:
                h_t[0], h_kind[0], h_id[0], h_ver[0] = (
                    h_t[size],
                    h_kind[size],
                    h_id[size],
                    h_ver[size],
                )
                _sift_down(h_t, h_kind, h_id, h_ver, 0, size)
            if kind == _START:
                msg_start[m] = te
                if inc_ptr[m + 1] == inc_ptr[m] or msg_bytes[m] <= 0:
                    done = te + route_lat[m]  # nothing to share: only the wire's latency
                    gone[m] = te
                else:
                    active[m] = True
                    n_active += 1
                    rem[m] = msg_bytes[m]
                    rate[m] = 0.0
                    t_upd[m] = te
                    for i in range(inc_ptr[m], inc_ptr[m + 1]):
                        lk = inc_link[i]
                        s = link_ptr[lk] + link_cnt[lk]
                        slot_inc[s] = i
                        inc_slot[i] = s
                        link_cnt[lk] += 1
                    seeds[n_seed] = m
                    n_seed += 1
                    continue
            else:
                if not active[m] or v != ver[m]:
                    continue  # superseded by a later rate update
                active[m] = False
                n_active -= 1
                rem[m] = 0.0
                for i in range(inc_ptr[m], inc_ptr[m + 1]):
                    lk = inc_link[i]
                    last = link_ptr[lk] + link_cnt[lk] - 1
                    s = inc_slot[i]
                    j = slot_inc[last]
                    slot_inc[s] = j
                    inc_slot[j] = s
                    link_cnt[lk] -= 1
                seeds[n_seed] = m
                n_seed += 1
                done = te + route_lat[m]
                gone[m] = te
            # Message m has arrived: record it and open its gate if it was the last.
            msg_done[m] = done
            if done > makespan:
                makespan = done
            batch[n_batch] = m
            n_batch += 1
        # Receive gates and send queues: a message whose last blocker cleared starts.
        n_free = 0
        for b in range(n_batch):
            m = batch[b]
            n_free = _release(
                into[m], msg_done[m], overhead, gate_time, left_gate, wait_ptr, wait_msgs,
                ready, blockers, freed, n_free,
            )  # fmt: skip
            n_free = _release(
                out[m], gone[m], 0.0, out_time, left_out, out_ptr, out_msgs,
                ready, blockers, freed, n_free,
            )  # fmt: skip
        for b in range(n_free):
            w = freed[b]
            if size == cap:
                cap *= 2
                h_t, h_kind, h_id, h_ver = _grow(h_t, h_kind, h_id, h_ver, cap)
            h_t[size], h_kind[size], h_id[size], h_ver[size] = ready[w], _START, w, 0
            _sift_up(h_t, h_kind, h_id, h_ver, size)
            size += 1
        if n_seed == 0:
            continue
        # The flows connected to the seeds through shared links (breadth first).
        nf = 0
        nl = 0
        for q in range(n_seed):
            m = seeds[q]
            if active[m] and f_stamp[m] != update:
                f_stamp[m] = update
                comp_f[nf] = m
                nf += 1
            nl = _add_links(m, inc_ptr, inc_link, l_stamp, update, comp_l, nl)
        ql = 0
        qf = 0
        while ql < nl or qf < nf:
            while ql < nl:
                lk = comp_l[ql]
                ql += 1
                for s in range(link_ptr[lk], link_ptr[lk] + link_cnt[lk]):
                    f = inc_msg[slot_inc[s]]
                    if f_stamp[f] != update:
                        f_stamp[f] = update
                        comp_f[nf] = f
                        nf += 1
            while qf < nf:
                nl = _add_links(comp_f[qf], inc_ptr, inc_link, l_stamp, update, comp_l, nl)
                qf += 1
        update += 1
        # Bring the connected flows' remaining bytes to time t, then refill their rates.
        for q in range(nf):
            f = comp_f[q]
            rem[f] = max(rem[f] - rate[f] * (t - t_upd[f]), 0.0)
            t_upd[f] = t
            frozen[f] = False
        for q in range(nl):
            lk = comp_l[q]
            res[lk] = bw[lk]
            unf[lk] = link_cnt[lk]
        left = nf
        while left > 0:
            share = np.inf
            for q in range(nl):
                lk = comp_l[q]
                if unf[lk] > 0:
                    s = res[lk] / unf[lk]
                    if s < share:
                        share = s
            cut = share * (1 + 1e-12)
            for q in range(nl):
                lk = comp_l[q]
                if unf[lk] == 0 or res[lk] / unf[lk] > cut:
                    continue
                for s in range(link_ptr[lk], link_ptr[lk] + link_cnt[lk]):
                    f = inc_msg[slot_inc[s]]
                    if frozen[f]:
                        continue
                    frozen[f] = True
                    left -= 1
                    rate[f] = share
                    for i in range(inc_ptr[f], inc_ptr[f + 1]):
                        l2 = inc_link[i]
                        res[l2] = max(res[l2] - share, 0.0)
                        unf[l2] -= 1
        # New drain times (a later update supersedes them through the version).
        if size + nf > cap:
            # Drop stale drains first; grow only if the heap is still too small.
            k = 0
            for e in range(size):
                if h_kind[e] == _DRAIN and (not active[h_id[e]] or h_ver[e] != ver[h_id[e]]):
                    continue
                h_t[k], h_kind[k], h_id[k], h_ver[k] = h_t[e], h_kind[e], h_id[e], h_ver[e]
                k += 1
            size = k
            for e in range(size // 2 - 1, -1, -1):
                _sift_down(h_t, h_kind, h_id, h_ver, e, size)
            while 2 * (size + nf) > cap:  # keep half free, so compaction stays rare
                cap *= 2
            if cap > h_t.size:
                h_t, h_kind, h_id, h_ver = _grow(h_t, h_kind, h_id, h_ver, cap)
        for q in range(nf):
            f = comp_f[q]
            ver[f] += 1
            h_t[size], h_kind[size], h_id[size], h_ver[size] = (
                t + rem[f] / rate[f],
                _DRAIN,
                f,
                ver[f],
            )
            _sift_up(h_t, h_kind, h_id, h_ver, size)
            size += 1
    return makespan


def _routes(topo: Topology, plan: Plan):
    """Each message's links as CSR (``inc_ptr``, ``inc_link``), routed once per (src, dst)."""
    n = topo.chips
    keys, pair = np.unique(plan.src * n + plan.dst, return_inverse=True)
    pptr = np.zeros(keys.size + 1, np.int64)
    plinks: list[int] = []
    for i, key in enumerate(keys.tolist()):
        plinks.extend(topo.route(*divmod(key, n)))
        pptr[i + 1] = len(plinks)
    plinks_a = np.asarray(plinks, np.int64)
    pair = pair.ravel()
    hops = np.diff(pptr)[pair]
    inc_ptr = np.zeros(pair.size + 1, np.int64)
    np.cumsum(hops, out=inc_ptr[1:])
    # Gather each message's pair route into one flat array.
    first = np.repeat(pptr[:-1][pair] - inc_ptr[:-1], hops)
    inc_link = plinks_a[first + np.arange(inc_ptr[-1])] if inc_ptr[-1] else np.zeros(0, np.int64)
    return inc_ptr, inc_link


def simulate(topo: Topology, plan: Plan):
    """Run the flow-level simulation; returns (time, msg_start, msg_done, link_busy, link_bytes).

    ``link_busy`` is each link's bytes over its bandwidth: the seconds it spends sending.
    """
    bw = np.ascontiguousarray(topo.link_bandwidth, dtype=np.float64)
    lat = np.ascontiguousarray(topo.link_latency, dtype=np.float64)
    inc_ptr, inc_link = _routes(topo, plan)
    link_ptr = np.zeros(bw.size + 1, np.int64)
    np.cumsum(np.bincount(inc_link, minlength=bw.size), out=link_ptr[1:])
    into, need, wait, wptr, wmsgs = gates(plan)
    out, oneed, owait, optr, omsgs = send_queues(plan)
    m = plan.messages
    start, done = np.zeros(m), np.zeros(m)
    t = _simulate(
        bw, lat, inc_ptr, inc_link, link_ptr, np.ascontiguousarray(plan.nbytes, np.float64),
        into, need, wait, wptr, wmsgs, out, oneed, owait, optr, omsgs,
        float(topo.message_overhead), start, done,
    )  # fmt: skip
    nbytes = np.bincount(inc_link, weights=np.repeat(plan.nbytes, np.diff(inc_ptr)),
                         minlength=bw.size) if inc_link.size else np.zeros(bw.size)  # fmt: skip
    # Links of zero bandwidth (the tiered Trn3 switch's unused ports) carry nothing: busy 0, not 0/0.
    busy = np.divide(nbytes, bw, out=np.zeros_like(nbytes), where=bw > 0)
    return float(t), start, done, busy, nbytes
