"""Mamba's selective scan (the SSM of Mamba v1), as three kernels in the kernel API.

For every channel c and state s: ``x[c, t] = exp(delta[c, t] * A[c, s]) * x[c, t - 1] +
delta[c, t] * u[c, t] * B[s, t]`` (x starting at 0), and the output sums ``x[c, t] * C[s, t]``
over the states. Channels go on partitions (128 per tile), time on the free dimension; the
recurrence is one Vector-engine ``tensor_tensor_scan`` per (channel tile, state); the rows of B
and C (one per state) reach all 128 partitions through a Tensor Engine matmul with a row of
ones (a partition broadcast into PSUM).

The three versions follow the structure of the NKI fused-Mamba tutorial (batch 1):

``v1``  states outside, channel tiles inside: delta and u are loaded again for every state.
``v2``  channel tiles outside: delta and u loaded once per channel tile, reused by all states.
``v3``  as v2, with the time axis in chunks of ``chunk`` (512) so every tile stays small; the
        scan carries its last column from chunk to chunk.

Tiles declared inside a loop get the compiler's rotating buffers, as in the other kernels.
"""

from __future__ import annotations

import numpy as np

from ._matmul import _want, plan_buffers

__all__ = ["VERSIONS", "selective_scan_kernel", "selective_scan_reference"]

P = 128


def selective_scan_reference(delta, u, a, b, c) -> np.ndarray:
    """The selective scan in numpy (float64): ``delta, u [channels, T]``, ``a [channels, S]``,
    ``b, c [S, T]``; returns ``[channels, T]``."""
    delta, u, a, b, c = (np.asarray(x, np.float64) for x in (delta, u, a, b, c))
    out = np.zeros_like(delta)
    for s in range(a.shape[1]):
        decay = np.exp(delta * a[:, s : s + 1])
        drive = delta * u * b[s]
        x = np.zeros(delta.shape[0])
        for t in range(delta.shape[1]):
            x = decay[:, t] * x + drive[:, t]
            out[:, t] += x * c[s, t]
    return out


class _Tiles:
    """The per-iteration tiles of one (channel tile, state, chunk) step, in rotating buffers."""

    def __init__(self, ctx, fmt, width, bufs):
        want = _want(ctx, bufs)
        nbytes = width * 4
        n = plan_buffers(ctx, [(nbytes, want)] * 5)[0]
        self.delta_a = ctx.sbuf((P, width), fmt, "deltaA", bufs=n)
        self.delta_u = ctx.sbuf((P, width), fmt, "deltaU", bufs=n)
        self.delta_bu = ctx.sbuf((P, width), fmt, "deltaBu", bufs=n)
        self.scan = ctx.sbuf((P, width), fmt, "scan", bufs=n)
        self.scan_c = ctx.sbuf((P, width), fmt, "scanC", bufs=n)
        self.b_row = ctx.sbuf((1, width), fmt, "B row", bufs=want)
        self.c_row = ctx.sbuf((1, width), fmt, "C row", bufs=want)
        self.a_col = ctx.sbuf((P, 1), fmt, "A column", bufs=want)
        self.bcast = ctx.psum((P, width), "broadcast", bufs=min(2 * want, 8))

    def step(self, ctx, ones, d, uu, a_col, b, c, s, t0, width, acc, init=None, du=None):
        """One state over one chunk: returns the scan tile (for the carry). ``du`` is delta x u
        when the caller computed it once for all states."""
        da, dbu = self.delta_a.next(), self.delta_bu.next()
        sc, scc = self.scan.next(), self.scan_c.next()
        ctx.activation(da, d, "exp", scale=a_col)
        br = self.b_row.next()
        ctx.load(br, b[s : s + 1, t0 : t0 + width])
        if du is None:
            du = self.delta_u.next()
            ctx.tensor_tensor(du, d, uu, "multiply")
        bb = self.bcast.next()
        ctx.matmul(bb, ones, br)  # B's row on every partition (K = 1 contraction)
        ctx.tensor_tensor(dbu, du, bb, "multiply")
        ctx.tensor_tensor_scan(sc, da, dbu, initial=0.0 if init is None else init)
        cr = self.c_row.next()
        ctx.load(cr, c[s : s + 1, t0 : t0 + width])
        cb = self.bcast.next()
        ctx.matmul(cb, ones, cr)
        ctx.tensor_tensor(scc, sc, cb, "multiply")
        ctx.tensor_tensor(acc, acc, scc, "add")
        return sc


def _ones(ctx, fmt):
    ones = ctx.sbuf((1, P), fmt, "ones")
    ctx.memset(ones, 1.0)
    return ones


def _v1(ctx, delta, u, a, b, c, out, fmt, chunk, bufs, hoist=False):
    C, T = delta.shape
    S = a.shape[1]
    ct = C // P
    acc = ctx.sbuf((P, ct * T), fmt, "scanC accum")
    ctx.memset(acc, 0.0)
    ones = _ones(ctx, fmt)
    want = _want(ctx, bufs)
    n = plan_buffers(ctx, [(T * 4, want)] * 2)[0]
    d_pool = ctx.sbuf((P, T), fmt, "delta tile", bufs=n)
    u_pool = ctx.sbuf((P, T), fmt, "u tile", bufs=n)
    tiles = _Tiles(ctx, fmt, T, bufs)
    for s in range(S):
        for i in range(ct):
            rows = slice(i * P, (i + 1) * P)
            d = d_pool.next()
            ctx.load(d, delta[rows, :])
            ac = tiles.a_col.next()
            ctx.load(ac, a[rows, s : s + 1])
            uu = u_pool.next()
            ctx.load(uu, u[rows, :])
            tiles.step(ctx, ones, d, uu, ac, b, c, s, 0, T, acc[:, i * T : (i + 1) * T])
    for i in range(ct):
        ctx.store(out[i * P : (i + 1) * P, :], acc[:, i * T : (i + 1) * T])


def _v2(ctx, delta, u, a, b, c, out, fmt, chunk, bufs, hoist=False, chunked=False):
    C, T = delta.shape
    S = a.shape[1]
    width = min(chunk, T) if chunked else T
    want = _want(ctx, bufs)
    n = plan_buffers(ctx, [(T * 4, want)] * 3)[0]
    ones = _ones(ctx, fmt)
    accs = ctx.sbuf((P, T), fmt, "scanC accum", bufs=n)
    d_pool = ctx.sbuf((P, T), fmt, "delta tile", bufs=n)
    u_pool = ctx.sbuf((P, T), fmt, "u tile", bufs=n)
    tiles = _Tiles(ctx, fmt, width, bufs)
    carry = ctx.sbuf((P, 1), fmt, "scan carry", bufs=want) if chunked else None
    du_pool = ctx.sbuf((P, T), fmt, "delta x u", bufs=n) if hoist else None
    for i in range(C // P):
        rows = slice(i * P, (i + 1) * P)
        acc = accs.next()
        ctx.memset(acc, 0.0)
        d, uu = d_pool.next(), u_pool.next()
        ctx.load(d, delta[rows, :])
        ctx.load(uu, u[rows, :])
        du = None
        if hoist:  # delta x u does not depend on the state: once per channel tile
            du = du_pool.next()
            ctx.tensor_tensor(du, d, uu, "multiply")
        for s in range(S):
            ac = tiles.a_col.next()
            ctx.load(ac, a[rows, s : s + 1])
            if not chunked:
                tiles.step(ctx, ones, d, uu, ac, b, c, s, 0, T, acc, du=du)
                continue
            init = carry.next()
            ctx.memset(init, 0.0)
            for t0 in range(0, T, width):
                sl = slice(t0, t0 + width)
                sc = tiles.step(
                    ctx,
                    ones,
                    d[:, sl],
                    uu[:, sl],
                    ac,
                    b,
                    c,
                    s,
                    t0,
                    width,
                    acc[:, sl],
                    init,
                    du=None if du is None else du[:, sl],
                )
                ctx.copy(init, sc[:, width - 1 : width])
        ctx.store(out[rows, :], acc)


def _v3(ctx, delta, u, a, b, c, out, fmt, chunk, bufs, hoist=False):
    _v2(ctx, delta, u, a, b, c, out, fmt, chunk, bufs, hoist, chunked=True)


VERSIONS = {"v1": _v1, "v2": _v2, "v3": _v3}


def selective_scan_kernel(
    ctx,
    delta,
    u,
    a,
    b,
    c,
    out,
    version: str = "v3",
    chunk: int = 512,
    bufs: int | None = None,
    hoist: bool = False,
):
    """Mamba's selective scan on one NeuronCore; ``version`` is ``"v1"``, ``"v2"`` or ``"v3"``
    (see the module docstring). HBM tensors: ``delta, u, out [channels, T]``, ``a [channels,
    S]``, ``b, c [S, T]``; channels a multiple of 128. ``hoist`` computes delta x u once per
    channel tile instead of once per state (v2 and v3: it does not depend on the state; the
    tutorial's kernels compute it inside the state loop)."""
    if version not in VERSIONS:
        raise ValueError(f"unknown version {version!r}; choose one of {', '.join(VERSIONS)}")
    C, _T = delta.shape
    if C % P:
        raise ValueError(f"channels ({C}) must be a multiple of {P}: they go on partitions")
    VERSIONS[version](
        ctx, delta, u, a, b, c, out, delta.fmt, chunk, bufs, hoist and version != "v1"
    )
