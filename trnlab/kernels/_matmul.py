"""The matmul progression, written in the kernel API: each variant one small strategy.

Layout (as in NKI's matmul tutorials): C[M, N] = A[M, K] @ B[K, N] with A stored transposed in
HBM, ``a_t[K, M]``, so both operands bring their K rows onto SBUF partitions (the Tensor
Engine contracts over partitions). Tiles are 128 (K) x 128 (M, stationary) x 512 (N, moving):
128 partitions, 128 PE columns, 512 fp32 accumulators per PSUM bank.

``tiled``        loads both operand tiles inside the innermost (K) loop: every tile is loaded
                 M/128 or N/512 times, small transfers, one buffer each -> DMA-bound.
``hoisted``      hoists the loads out of the reduction loop: a column strip of A (all of K) is
                 loaded once per M tile and reused across N.
``blocked_mn``   blocks over M and N: a block of A and one of B (all of K) stay in SBUF and
                 every pair of their tiles is multiplied, so each load feeds many matmuls.
                 Block sizes shrink as K grows: the strips must fit SBUF.
``blocked_mnk``  also blocks K, so large blocks fit SBUF at any K; partial sums over K blocks
                 accumulate in fp32 SBUF tiles on the Vector engine. One set of buffers, in
                 narrow tiles freed as the sweep moves on, so part of the next block's loads
                 overlap the matmuls.
``pipelined``    blocked_mnk with two sets of block buffers: the DMA loads block k+1 while the
                 Tensor Engine multiplies block k.

``tiled``, ``hoisted`` and ``blocked_mn`` take other tile sizes (``tile_k``, ``tile_m``,
``tile_n``) to show why 128 x 128 x 512 is the right one; the core refuses sizes beyond its
limits with a message naming the limit.
"""

from __future__ import annotations

import itertools

from trnlab.core import format_bits

__all__ = ["VARIANTS", "blocked_mn", "blocked_mnk", "hoisted", "pipelined", "tiled"]

TILE_K, TILE_M, TILE_N = 128, 128, 512


def _spans(n: int, t: int) -> list[tuple[int, int]]:
    """(start, size) of the tiles of a dimension of size n; the last may be partial."""
    return [(i, min(t, n - i)) for i in range(0, n, t)]


def _evacuate(ctx, c, ps, out, m0, ms, n0, ns, engine="vector"):
    """PSUM -> SBUF with a cast to C's format, then DMA to HBM."""
    ctx.copy(out[:ms, :ns], ps[:ms, :ns], engine=engine)
    ctx.store(c[m0 : m0 + ms, n0 : n0 + ns], out[:ms, :ns])


def tiled(
    ctx,
    a_t,
    b,
    c,
    fmt: str | None = None,
    tile_k: int = TILE_K,
    tile_m: int = TILE_M,
    tile_n: int = TILE_N,
):
    """The textbook tiling: load an A tile and a B tile for every matmul.

    ``tile_k x tile_m x tile_n`` (default 128 x 128 x 512) is the tile of one matmul; the
    core refuses sizes beyond its limits, with the limit in the message."""
    fmt = fmt or a_t.fmt
    (K, M), N = a_t.shape, b.shape[1]
    st = ctx.sbuf((tile_k, tile_m), fmt, "a_t tile")
    mv = ctx.sbuf((tile_k, tile_n), fmt, "b tile")
    ps = ctx.psum((tile_m, tile_n), "acc")
    out = ctx.sbuf((tile_m, tile_n), c.fmt, "c tile")
    for m0, ms in _spans(M, tile_m):
        for n0, ns in _spans(N, tile_n):
            for i, (k0, ks) in enumerate(_spans(K, tile_k)):
                ctx.load(st[:ks, :ms], a_t[k0 : k0 + ks, m0 : m0 + ms])
                ctx.load(mv[:ks, :ns], b[k0 : k0 + ks, n0 : n0 + ns])
                ctx.matmul(ps[:ms, :ns], st[:ks, :ms], mv[:ks, :ns], accumulate=i > 0)
            _evacuate(ctx, c, ps, out, m0, ms, n0, ns)


def hoisted(
    ctx,
    a_t,
    b,
    c,
    fmt: str | None = None,
    tile_k: int = TILE_K,
    tile_m: int = TILE_M,
    tile_n: int = TILE_N,
):
    """Loads hoisted out of the K loop: A's strip once per M tile, B's strip once per (M, N)."""
    fmt = fmt or a_t.fmt
    (K, M), N = a_t.shape, b.shape[1]
    ks_ = _spans(K, tile_k)
    a_tiles = [ctx.sbuf((tile_k, tile_m), fmt, f"a_t k{j}") for j in range(len(ks_))]
    b_tiles = [ctx.sbuf((tile_k, tile_n), fmt, f"b k{j}") for j in range(len(ks_))]
    psums = [ctx.psum((tile_m, tile_n), f"acc{j}") for j in range(2)]
    outs = [ctx.sbuf((tile_m, tile_n), c.fmt, f"c tile{j}") for j in range(2)]
    step = 0
    for m0, ms in _spans(M, tile_m):
        for j, (k0, ks) in enumerate(ks_):
            ctx.load(a_tiles[j][:ks, :ms], a_t[k0 : k0 + ks, m0 : m0 + ms])
        for n0, ns in _spans(N, tile_n):
            for j, (k0, ks) in enumerate(ks_):
                ctx.load(b_tiles[j][:ks, :ns], b[k0 : k0 + ks, n0 : n0 + ns])
            ps, out = psums[step % 2], outs[step % 2]
            for j, (_, ks) in enumerate(ks_):
                ctx.matmul(
                    ps[:ms, :ns], a_tiles[j][:ks, :ms], b_tiles[j][:ks, :ns], accumulate=j > 0
                )
            _evacuate(ctx, c, ps, out, m0, ms, n0, ns)
            step += 1


def _fit_mn_blocks(
    ctx, K: int, fmt_bits: float, out_bits: float, tile=(TILE_K, TILE_M, TILE_N)
) -> tuple[int, int]:
    """Largest (tiles of M, tiles of N) whose full-K strips fit the usable SBUF."""
    tile_k, tile_m, tile_n = tile
    cap = ctx.params.sbuf_usable_partition_bytes
    kt = -(-K // tile_k)
    for tm, tn in ((8, 4), (4, 4), (4, 2), (2, 2), (2, 1), (1, 1)):
        need = kt * (tm * tile_m + tn * tile_n) * fmt_bits / 8 + 2 * tile_n * out_bits / 8
        if need <= 0.9 * cap:
            return tm, tn
    return 1, 1


def blocked_mn(
    ctx,
    a_t,
    b,
    c,
    fmt: str | None = None,
    tiles_m: int | None = None,
    tiles_n: int | None = None,
    tile_k: int = TILE_K,
    tile_m: int = TILE_M,
    tile_n: int = TILE_N,
):
    """Blocks of M and N resident in SBUF over all of K; each loaded tile feeds many matmuls."""
    fmt = fmt or a_t.fmt
    (K, M), N = a_t.shape, b.shape[1]
    ks_ = _spans(K, tile_k)
    if tiles_m is None or tiles_n is None:
        tile = (tile_k, tile_m, tile_n)
        fm, fn = _fit_mn_blocks(ctx, K, format_bits(fmt), format_bits(c.fmt), tile)
        tiles_m, tiles_n = tiles_m or fm, tiles_n or fn
    bm, bn = tiles_m * tile_m, tiles_n * tile_n
    a_blk = [ctx.sbuf((tile_k, bm), fmt, f"A block k{j}") for j in range(len(ks_))]
    b_blk = [ctx.sbuf((tile_k, bn), fmt, f"B block k{j}") for j in range(len(ks_))]
    psums = [ctx.psum((tile_m, tile_n), f"acc{j}") for j in range(2)]
    outs = [ctx.sbuf((tile_m, tile_n), c.fmt, f"c tile{j}") for j in range(2)]
    step = 0
    for M0, MS in _spans(M, bm):
        for N0, NS in _spans(N, bn):
            for j, (k0, ks) in enumerate(ks_):
                ctx.load(a_blk[j][:ks, :MS], a_t[k0 : k0 + ks, M0 : M0 + MS])
                ctx.load(b_blk[j][:ks, :NS], b[k0 : k0 + ks, N0 : N0 + NS])
            for m0, ms in _spans(MS, tile_m):
                for n0, ns in _spans(NS, tile_n):
                    ps, out = psums[step % 2], outs[step % 2]
                    for j, (_, ks) in enumerate(ks_):
                        ctx.matmul(
                            ps[:ms, :ns],
                            a_blk[j][:ks, m0 : m0 + ms],
                            b_blk[j][:ks, n0 : n0 + ns],
                            accumulate=j > 0,
                        )
                    _evacuate(
                        ctx, c, ps, out, M0 + m0, ms, N0 + n0, ns, ("vector", "scalar")[step % 2]
                    )
                    step += 1


def _fit_mnk_blocks(ctx, fmt, out_fmt, buffers, tiles_m, tiles_n, tiles_k):
    """Shrink the block (K first, then N, then M) until its buffers fit the usable SBUF."""
    cap = 0.95 * ctx.params.sbuf_usable_partition_bytes
    bits, out_bits = format_bits(fmt), format_bits(out_fmt)

    def need(tm, tn, tk):
        blocks = buffers * tk * (tm * TILE_M + tn * TILE_N) * bits / 8
        return blocks + tm * tn * TILE_N * 4 + tn * TILE_N * out_bits / 8

    while need(tiles_m, tiles_n, tiles_k) > cap:
        if tiles_k > 2:
            tiles_k //= 2
        elif tiles_n > 1:
            tiles_n //= 2
        elif tiles_m > 1:
            tiles_m //= 2
        else:
            break
    return tiles_m, tiles_n, tiles_k


class _Blocks:
    """``buffers`` sets of SBUF buffers for an A block [bk, bm] and a B block [bk, bn].

    A tile holds one K tile (128 rows) x ``aw`` columns of A (``bw`` of B), so a block is
    ``kt`` x ``bm / aw`` A tiles; narrow tiles free up early, wide ones load efficiently.
    """

    def __init__(self, ctx, fmt, bm, bn, kt, buffers, aw, bw):
        self.aw, self.bw, self.buffers = aw, bw, buffers
        self.a = [
            [
                [ctx.sbuf((TILE_K, aw), fmt, f"A{s} k{j} m{q}") for q in range(-(-bm // aw))]
                for j in range(kt)
            ]
            for s in range(buffers)
        ]
        self.b = [
            [
                [ctx.sbuf((TILE_K, bw), fmt, f"B{s} k{j} n{q}") for q in range(-(-bn // bw))]
                for j in range(kt)
            ]
            for s in range(buffers)
        ]
        half = max(1, (int(ctx.params.dma_engines) - 1) // 2)  # the last queue is for stores
        self.a_queue = itertools.cycle(range(half))
        self.b_queue = itertools.cycle(range(half, 2 * half))

    def a_view(self, s, j, ks, m0, ms):
        q, off = divmod(m0, self.aw)
        return self.a[s][j][q][:ks, off : off + ms]

    def b_view(self, s, j, ks, n0, ns):
        q, off = divmod(n0, self.bw)
        return self.b[s][j][q][:ks, off : off + ns]

    def load(self, ctx, s, a_t, b, K0, kspans, M0, MS, N0, NS):
        """Load one block into buffer set ``s``, in the order the buffers free up (queues run
        in order), A and B on separate halves of the DMA queues."""
        for tiles, src, c0, width, w, queues in (
            (self.a[s], a_t, M0, MS, self.aw, self.a_queue),
            (self.b[s], b, N0, NS, self.bw, self.b_queue),
        ):
            for q0, qs in _spans(width, w):
                for j, (k0, ks) in enumerate(kspans):
                    rows = slice(K0 + k0, K0 + k0 + ks)
                    ctx.load(
                        tiles[j][q0 // w][:ks, :qs],
                        src[rows, c0 + q0 : c0 + q0 + qs],
                        queue=next(queues),
                    )


def _sweep_n_outer(ctx, blocks, s, kspans, mspans, nspans, psums, start, accumulate):
    """for n, for m, for k: B tiles of the first N tiles are free (and refilled for the next
    block) while the later ones are still multiplied."""
    for n0, ns in nspans:
        for i, (m0, ms) in enumerate(mspans):
            ps = psums[start % len(psums)]
            start += 1
            for j, (_, ks) in enumerate(kspans):
                st = blocks.a_view(s, j, ks, m0, ms)
                ctx.matmul(ps[:ms, :ns], st, blocks.b_view(s, j, ks, n0, ns), accumulate=j > 0)
            accumulate(i, ms, n0, ns, ps)
    return start


def _sweep_keep_stationary(ctx, blocks, s, kspans, mspans, nspans, psums, start, accumulate):
    """for m, for k, for n: each stationary A tile serves every N tile of the block (one fast
    weight load per ``len(nspans)`` matmuls; that many PSUM groups in flight)."""
    for i, (m0, ms) in enumerate(mspans):
        pss = [psums[(start + q) % len(psums)] for q in range(len(nspans))]
        start += len(nspans)
        for j, (_, ks) in enumerate(kspans):
            st = blocks.a_view(s, j, ks, m0, ms)
            for q, (n0, ns) in enumerate(nspans):
                ctx.matmul(pss[q][:ms, :ns], st, blocks.b_view(s, j, ks, n0, ns), accumulate=j > 0)
        for q, (n0, ns) in enumerate(nspans):
            accumulate(i, ms, n0, ns, pss[q])
    return start


def _blocked_mnk(ctx, a_t, b, c, fmt, tiles_m, tiles_n, tiles_k, buffers, sweep, aw, bw):
    """Blocks over M, N and K; partial sums over K blocks in fp32 SBUF accumulators (the
    Vector engine adds each PSUM group in); ``buffers`` block buffer sets used in turn."""
    fmt = fmt or a_t.fmt
    (K, M), N = a_t.shape, b.shape[1]
    tiles_m, tiles_n, tiles_k = _fit_mnk_blocks(ctx, fmt, c.fmt, buffers, tiles_m, tiles_n, tiles_k)
    bm = min(tiles_m * TILE_M, -(-M // TILE_M) * TILE_M)
    bn = min(tiles_n * TILE_N, -(-N // TILE_N) * TILE_N)
    bk = min(tiles_k * TILE_K, -(-K // TILE_K) * TILE_K)
    blocks = _Blocks(ctx, fmt, bm, bn, bk // TILE_K, buffers, min(aw or bm, bm), min(bw or bn, bn))
    acc = [ctx.sbuf((TILE_M, bn), "fp32", f"C acc m{i}") for i in range(bm // TILE_M)]
    psums = [ctx.psum((TILE_M, TILE_N), f"psum{j}") for j in range(min(8, 2 * (bn // TILE_N)))]
    out = ctx.sbuf((TILE_M, bn), c.fmt, "c tile")
    groups = blk = 0
    for M0, MS in _spans(M, bm):
        for N0, NS in _spans(N, bn):
            for kb, (K0, KS) in enumerate(_spans(K, bk)):
                s = blk % buffers
                blk += 1
                kspans = _spans(KS, TILE_K)
                blocks.load(ctx, s, a_t, b, K0, kspans, M0, MS, N0, NS)

                def accumulate(i, ms, n0, ns, ps, first=kb == 0):
                    dst = acc[i][:ms, n0 : n0 + ns]
                    if first:
                        ctx.copy(dst, ps[:ms, :ns], engine="scalar")
                    else:
                        ctx.tensor_tensor(dst, dst, ps[:ms, :ns], "add")

                spans_m, spans_n = _spans(MS, TILE_M), _spans(NS, TILE_N)
                groups = sweep(ctx, blocks, s, kspans, spans_m, spans_n, psums, groups, accumulate)
            for i, (m0, ms) in enumerate(_spans(MS, TILE_M)):
                ctx.copy(out[:ms, :NS], acc[i][:ms, :NS], engine="scalar")
                ctx.store(c[M0 + m0 : M0 + m0 + ms, N0 : N0 + NS], out[:ms, :NS])


def blocked_mnk(
    ctx, a_t, b, c, fmt: str | None = None, tiles_m: int = 8, tiles_n: int = 4, tiles_k: int = 16
):
    """Blocks over M, N and K (one set of buffers): big blocks fit SBUF whatever K is.
    Narrow tiles (A: 4 M tiles, B: 1 N tile) swept N tile by N tile let the next block's
    loads start while this block is still being multiplied."""
    _blocked_mnk(
        ctx, a_t, b, c, fmt, tiles_m, tiles_n, tiles_k, 1, _sweep_n_outer, 4 * TILE_M, TILE_N
    )


def pipelined(
    ctx, a_t, b, c, fmt: str | None = None, tiles_m: int = 8, tiles_n: int = 4, tiles_k: int = 8
):
    """blocked_mnk with double-buffered blocks: the DMA loads block k+1 (whole-block-wide
    tiles, efficient transfers) while the Tensor Engine multiplies block k, keeping each
    stationary tile for all the N tiles of the block."""
    _blocked_mnk(
        ctx, a_t, b, c, fmt, tiles_m, tiles_n, tiles_k, 2, _sweep_keep_stationary, None, None
    )


#: The progression, slowest first.
VARIANTS = {
    "tiled": tiled,
    "hoisted": hoisted,
    "blocked_mn": blocked_mn,
    "blocked_mnk": blocked_mnk,
    "pipelined": pipelined,
}
