"""The matmul progression, written in the kernel API and structured like NKI's matmul tutorial.

Layout (as in the tutorial): C[M, N] = A[M, K] @ B[K, N] with A stored transposed in HBM,
``a_t[K, M]``, so both operands bring their K rows onto SBUF partitions (the Tensor Engine
contracts over partitions). Tiles are 128 (K) x 128 (M, stationary) x 512 (N, moving): 128
partitions, 128 PE columns, 512 fp32 accumulators per PSUM bank.

Buffers follow the NKI compiler: a tile the tutorial declares inside a loop body gets
``compiler_rotating_buffers`` rotating buffers (a catalogue figure), as many as SBUF holds
(:func:`plan_buffers`; the largest pool gives up buffers first). So each variant here is the
tutorial's kernel as the compiler would lay it out, and the progression compares like with like:

``tiled``        (tutorial: original tiled) loads an A tile and a B tile for every matmul, in
                 rotating buffers: small transfers, one per matmul -> DMA-bound.
``hoisted``      (optimization 1) loads A's column strip (all of K) once per M tile and B's
                 once per (M, N) tile; the strips are too big for two buffers each.
``blocked_mn``   (optimization 2) blocks M and N (2 x 2 tiles by default): each loaded tile
                 feeds two matmuls.
``blocked_mnk``  (optimization 3, "fully optimized") blocks M, N and K (16 x 2 x 8 tiles):
                 wide transfers (2-4 KiB per partition), partial sums over K blocks added into
                 SBUF accumulators by the Vector engine, B and A blocks double-buffered.
``pipelined``    one step further than the tutorial: blocked_mnk with a third rotating buffer
                 for each block (the compiler already gives two, so this buys a few percent).

``tiled``, ``hoisted`` and ``blocked_mn`` take other tile sizes (``tile_k``, ``tile_m``,
``tile_n``) to show why 128 x 128 x 512 is the right one; the core refuses sizes beyond its
limits with a message naming the limit. Every variant takes ``bufs`` (the rotating-buffer
count to ask for; default the compiler's).
"""

from __future__ import annotations

import math

from trnlab._checks import whole
from trnlab.core import KernelArgumentError, format_bits

__all__ = [
    "VARIANTS",
    "blocked_mn",
    "blocked_mnk",
    "estimate_instructions",
    "hoisted",
    "pipelined",
    "plan_buffers",
    "tiled",
]

TILE_K, TILE_M, TILE_N = 128, 128, 512


def _spans(n: int, t: int) -> list[tuple[int, int]]:
    """(start, size) of the tiles of a dimension of size n; the last may be partial."""
    return [(i, min(t, n - i)) for i in range(0, n, t)]


def _sbuf_bytes(free: int, fmt: str) -> int:
    return math.ceil(free * format_bits(fmt) / 8)


def plan_buffers(ctx, pools: list[tuple[int, int]]) -> list[int]:
    """Rotating buffers for each pool, as the compiler would give them within SBUF.

    ``pools`` holds ``(bytes per partition of one buffer, buffers wanted)``. While the pools
    need more than the SBUF left free, the pool taking the most bytes gives up one buffer (never
    going below one); a pool of one buffer that still does not fit is left for the allocation to
    refuse with its teaching error.
    """
    cap = ctx.sbuf_available()
    bufs = [max(1, int(want)) for _, want in pools]
    while sum(b * n for (b, _), n in zip(pools, bufs, strict=True)) > cap:
        cands = [i for i, n in enumerate(bufs) if n > 1]
        if not cands:
            break
        i = max(cands, key=lambda j: pools[j][0] * bufs[j])
        bufs[i] -= 1
    return bufs


def _want(ctx, bufs: int | None) -> int:
    if bufs is None:
        return int(ctx.params.compiler_rotating_buffers)
    return whole(bufs, "bufs (rotating buffers per tile)", 1, 64, KernelArgumentError)


def _sizes(**sizes: int) -> list[int]:
    """Tile sizes and block counts as whole numbers >= 1 (a 0 would loop forever or divide by 0)."""
    return [whole(v, k, 1, 1 << 20, KernelArgumentError) for k, v in sizes.items()]


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
    bufs: int | None = None,
):
    """The textbook tiling: load an A tile and a B tile for every matmul.

    As in NKI's tutorial, the A and B tiles are declared inside the K loop, so the compiler
    rotates them over ``bufs`` buffers and the loads of the next K step overlap this matmul.
    ``tile_k x tile_m x tile_n`` (default 128 x 128 x 512) is the tile of one matmul."""
    tile_k, tile_m, tile_n = _sizes(tile_k=tile_k, tile_m=tile_m, tile_n=tile_n)
    fmt = fmt or a_t.fmt
    (K, M), N = a_t.shape, b.shape[1]
    want = _want(ctx, bufs)
    na, nb, no = plan_buffers(
        ctx,
        [
            (_sbuf_bytes(tile_m, fmt), want),
            (_sbuf_bytes(tile_n, fmt), want),
            (_sbuf_bytes(tile_n, c.fmt), want),
        ],
    )
    st = ctx.sbuf((tile_k, tile_m), fmt, "a_t tile", bufs=na)
    mv = ctx.sbuf((tile_k, tile_n), fmt, "b tile", bufs=nb)
    acc = ctx.psum((tile_m, tile_n), "acc", bufs=min(want, int(ctx.params.psum_banks)))
    out = ctx.sbuf((tile_m, tile_n), c.fmt, "c tile", bufs=no)
    for m0, ms in _spans(M, tile_m):
        for n0, ns in _spans(N, tile_n):
            ps = acc.next()
            for i, (k0, ks) in enumerate(_spans(K, tile_k)):
                a, bt = st.next(), mv.next()
                ctx.load(a[:ks, :ms], a_t[k0 : k0 + ks, m0 : m0 + ms])
                ctx.load(bt[:ks, :ns], b[k0 : k0 + ks, n0 : n0 + ns])
                ctx.matmul(ps[:ms, :ns], a[:ks, :ms], bt[:ks, :ns], accumulate=i > 0)
            _evacuate(ctx, c, ps, out.next(), m0, ms, n0, ns)


def hoisted(
    ctx,
    a_t,
    b,
    c,
    fmt: str | None = None,
    tile_k: int = TILE_K,
    tile_m: int = TILE_M,
    tile_n: int = TILE_N,
    bufs: int | None = None,
    a_width: int | None = None,
):
    """Loads hoisted out of the K loop: A's strip once per M tile, B's strip once per (M, N).

    The strips (all of K) are declared in the M and N loop bodies, as the tutorial does, so the
    compiler rotates them over as many buffers as SBUF holds (with K = 8192 in bf16, B's strip
    takes 64 KiB per partition). ``a_width`` is the SBUF width of each K tile of A's strip
    (default ``tile_m``; the tutorial's first edition allocated ``tile_n`` columns and loaded
    ``tile_m`` of them, which takes four times the SBUF)."""
    tile_k, tile_m, tile_n = _sizes(tile_k=tile_k, tile_m=tile_m, tile_n=tile_n)
    fmt = fmt or a_t.fmt
    (K, M), N = a_t.shape, b.shape[1]
    ks_ = _spans(K, tile_k)
    kt = len(ks_)
    wa = tile_m if a_width is None else whole(a_width, "a_width", 1, 1 << 20, KernelArgumentError)
    if wa < tile_m:
        raise KernelArgumentError(f"a_width {wa} is narrower than the M tile {tile_m}")
    want = _want(ctx, bufs)
    na, nb, no = plan_buffers(
        ctx,
        [
            (kt * _sbuf_bytes(wa, fmt), want),
            (kt * _sbuf_bytes(tile_n, fmt), want),
            (_sbuf_bytes(tile_n, c.fmt), want),
        ],
    )
    a_strips = ctx.sbuf((tile_k, kt * wa), fmt, "a_t strip", bufs=na)
    b_strips = ctx.sbuf((tile_k, kt * tile_n), fmt, "b strip", bufs=nb)
    acc = ctx.psum((tile_m, tile_n), "acc", bufs=min(want, int(ctx.params.psum_banks)))
    out = ctx.sbuf((tile_m, tile_n), c.fmt, "c tile", bufs=no)
    for m0, ms in _spans(M, tile_m):
        a = a_strips.next()
        for j, (k0, ks) in enumerate(ks_):
            ctx.load(a[:ks, j * wa : j * wa + ms], a_t[k0 : k0 + ks, m0 : m0 + ms])
        for n0, ns in _spans(N, tile_n):
            bs = b_strips.next()
            for j, (k0, ks) in enumerate(ks_):
                ctx.load(bs[:ks, j * tile_n : j * tile_n + ns], b[k0 : k0 + ks, n0 : n0 + ns])
            ps = acc.next()
            for j, (_, ks) in enumerate(ks_):
                ctx.matmul(
                    ps[:ms, :ns],
                    a[:ks, j * wa : j * wa + ms],
                    bs[:ks, j * tile_n : j * tile_n + ns],
                    accumulate=j > 0,
                )
            _evacuate(ctx, c, ps, out.next(), m0, ms, n0, ns)


def _fit_mn_blocks(ctx, K, fmt, out_fmt, tile, tiles_m, tiles_n):
    """Shrink the (M, N) block until one buffer of each strip fits the SBUF left free."""
    tile_k, tile_m, tile_n = tile
    kt = -(-K // tile_k)
    cap = ctx.sbuf_available()

    def need(tm, tn):
        strips = kt * (tm * _sbuf_bytes(tile_m, fmt) + tn * _sbuf_bytes(tile_n, fmt))
        return strips + 2 * _sbuf_bytes(tile_n, out_fmt)

    while need(tiles_m, tiles_n) > cap and (tiles_m > 1 or tiles_n > 1):
        if tiles_n >= tiles_m and tiles_n > 1:
            tiles_n = max(1, tiles_n // 2)
        else:
            tiles_m = max(1, tiles_m // 2)
    return tiles_m, tiles_n


def blocked_mn(
    ctx,
    a_t,
    b,
    c,
    fmt: str | None = None,
    tiles_m: int = 2,
    tiles_n: int = 2,
    tile_k: int = TILE_K,
    tile_m: int = TILE_M,
    tile_n: int = TILE_N,
    bufs: int | None = None,
):
    """Blocks of M and N resident in SBUF over all of K; each loaded tile feeds ``tiles_n``
    (A) or ``tiles_m`` (B) matmuls. The tutorial's 2 x 2 tiles by default; the block shrinks as
    K grows so its strips fit SBUF."""
    tile_k, tile_m, tile_n, tiles_m, tiles_n = _sizes(
        tile_k=tile_k, tile_m=tile_m, tile_n=tile_n, tiles_m=tiles_m, tiles_n=tiles_n
    )
    fmt = fmt or a_t.fmt
    (K, M), N = a_t.shape, b.shape[1]
    ks_ = _spans(K, tile_k)
    kt = len(ks_)
    tiles_m, tiles_n = _fit_mn_blocks(
        ctx, K, fmt, c.fmt, (tile_k, tile_m, tile_n), tiles_m, tiles_n
    )
    bm, bn = tiles_m * tile_m, tiles_n * tile_n
    want = _want(ctx, bufs)
    na, nb, no = plan_buffers(
        ctx,
        [
            (kt * _sbuf_bytes(bm, fmt), want),
            (kt * _sbuf_bytes(bn, fmt), want),
            (_sbuf_bytes(tile_n, c.fmt), want),
        ],
    )
    a_blocks = ctx.sbuf((tile_k, kt * bm), fmt, "A block", bufs=na)
    b_blocks = ctx.sbuf((tile_k, kt * bn), fmt, "B block", bufs=nb)
    acc = ctx.psum((tile_m, tile_n), "acc", bufs=min(want, int(ctx.params.psum_banks)))
    out = ctx.sbuf((tile_m, tile_n), c.fmt, "c tile", bufs=no)
    for M0, MS in _spans(M, bm):
        a = a_blocks.next()
        mspans = _spans(MS, tile_m)
        for i, (m0, ms) in enumerate(mspans):
            for j, (k0, ks) in enumerate(ks_):
                col = (i * kt + j) * tile_m
                ctx.load(a[:ks, col : col + ms], a_t[k0 : k0 + ks, M0 + m0 : M0 + m0 + ms])
        for N0, NS in _spans(N, bn):
            bb = b_blocks.next()
            nspans = _spans(NS, tile_n)
            for q, (n0, ns) in enumerate(nspans):
                for j, (k0, ks) in enumerate(ks_):
                    col = (q * kt + j) * tile_n
                    ctx.load(bb[:ks, col : col + ns], b[k0 : k0 + ks, N0 + n0 : N0 + n0 + ns])
            for i, (m0, ms) in enumerate(mspans):
                for q, (n0, ns) in enumerate(nspans):
                    ps = acc.next()
                    for j, (_, ks) in enumerate(ks_):
                        ca, cb = (i * kt + j) * tile_m, (q * kt + j) * tile_n
                        ctx.matmul(
                            ps[:ms, :ns],
                            a[:ks, ca : ca + ms],
                            bb[:ks, cb : cb + ns],
                            accumulate=j > 0,
                        )
                    _evacuate(ctx, c, ps, out.next(), M0 + m0, ms, N0 + n0, ns)


def _blocked_mnk(ctx, a_t, b, c, fmt, tiles_m, tiles_n, tiles_k, bufs):
    """Blocks over M, N and K as the tutorial's fully optimized kernel: for each N block, an
    SBUF accumulator for all of M; for each K block (in order), B's block (loads of ``tiles_k``
    x [128, block N]); for each M block, A's block (``tiles_k`` x [128, block M]); the PSUM
    group of every (N tile, M tile) is added into the accumulator by the Vector engine."""
    tiles_m, tiles_n, tiles_k = _sizes(tiles_m=tiles_m, tiles_n=tiles_n, tiles_k=tiles_k)
    fmt = fmt or a_t.fmt
    acc_fmt = c.fmt  # as the tutorial: the accumulator has C's format
    (K, M), N = a_t.shape, b.shape[1]
    mt = -(-M // TILE_M)  # the accumulator holds every M tile x the N tiles of a block
    cap = ctx.sbuf_available()

    def sizes(tm, tn, tkk):
        bm = min(tm * TILE_M, mt * TILE_M)
        bn = min(tn * TILE_N, -(-N // TILE_N) * TILE_N)
        bk = min(tkk * TILE_K, -(-K // TILE_K) * TILE_K)
        return (
            bm,
            bn,
            bk,
            [
                mt * _sbuf_bytes(bn, acc_fmt),
                (bk // TILE_K) * _sbuf_bytes(bn, fmt),
                (bk // TILE_K) * _sbuf_bytes(bm, fmt),
                _sbuf_bytes(bn, c.fmt),
            ],
        )

    # Shrink the blocks (K first, then N, then M) until one buffer of each fits SBUF.
    while sum(sizes(tiles_m, tiles_n, tiles_k)[3]) > cap:
        if tiles_k > 2:
            tiles_k //= 2
        elif tiles_n > 1:
            tiles_n //= 2
        elif tiles_m > 1:
            tiles_m //= 2
        else:
            break
    bm, bn, bk, need = sizes(tiles_m, tiles_n, tiles_k)
    tk = bk // TILE_K
    want = _want(ctx, bufs)
    n_acc, n_b, n_a, n_out = plan_buffers(ctx, [(x, want) for x in need])
    accs = ctx.sbuf((TILE_M, mt * bn), acc_fmt, "C accumulator", bufs=n_acc)
    b_blocks = ctx.sbuf((TILE_K, tk * bn), fmt, "B block", bufs=n_b)
    a_blocks = ctx.sbuf((TILE_K, tk * bm), fmt, "A block", bufs=n_a)
    packed = ctx.sbuf((TILE_M, bn), c.fmt, "c block", bufs=n_out)
    n_ps = min(int(ctx.params.psum_banks), 2 * want)
    psums = ctx.psum((TILE_M, TILE_N), "psum", bufs=n_ps)
    for N0, NS in _spans(N, bn):
        acc = accs.next()
        nspans = _spans(NS, TILE_N)
        for kb, (K0, KS) in enumerate(_spans(K, bk)):
            bb = b_blocks.next()
            kspans = _spans(KS, TILE_K)
            for j, (k0, ks) in enumerate(kspans):
                ctx.load(bb[:ks, j * bn : j * bn + NS], b[K0 + k0 : K0 + k0 + ks, N0 : N0 + NS])
            for M0, MS in _spans(M, bm):
                a = a_blocks.next()
                for j, (k0, ks) in enumerate(kspans):
                    ctx.load(
                        a[:ks, j * bm : j * bm + MS], a_t[K0 + k0 : K0 + k0 + ks, M0 : M0 + MS]
                    )
                mspans = _spans(MS, TILE_M)

                def add_in(m0, ms, n0, ns, ps, M0=M0, first=kb == 0, acc=acc):
                    col = ((M0 + m0) // TILE_M) * bn + n0
                    dst = acc[:ms, col : col + ns]
                    if first:
                        ctx.copy(dst, ps[:ms, :ns], engine="vector")
                    else:
                        ctx.tensor_tensor(dst, dst, ps[:ms, :ns], "add")

                for n0, ns in nspans:  # the tutorial's order: for bn: for bm: for bk
                    for m0, ms in mspans:
                        ps = psums.next()
                        for j, (_, ks) in enumerate(kspans):
                            ctx.matmul(
                                ps[:ms, :ns],
                                a[:ks, j * bm + m0 : j * bm + m0 + ms],
                                bb[:ks, j * bn + n0 : j * bn + n0 + ns],
                                accumulate=j > 0,
                            )
                        add_in(m0, ms, n0, ns, ps)
        for i, (m0, ms) in enumerate(_spans(M, TILE_M)):
            out = packed.next()
            for n0, ns in nspans:
                ctx.copy(out[:ms, n0 : n0 + ns], acc[:ms, i * bn + n0 : i * bn + n0 + ns])
            ctx.store(c[m0 : m0 + ms, N0 : N0 + NS], out[:ms, :NS])


def blocked_mnk(
    ctx,
    a_t,
    b,
    c,
    fmt: str | None = None,
    tiles_m: int = 16,
    tiles_n: int = 2,
    tiles_k: int = 8,
    bufs: int | None = None,
):
    """Blocks over M, N and K (the tutorial's fully optimized kernel, 16 x 2 x 8 tiles): wide
    transfers, each stationary loaded once per matmul, partial sums over K blocks added into an
    SBUF accumulator in C's format (as the tutorial does: bf16 for bf16 C)."""
    _blocked_mnk(ctx, a_t, b, c, fmt, tiles_m, tiles_n, tiles_k, bufs)


def pipelined(
    ctx,
    a_t,
    b,
    c,
    fmt: str | None = None,
    tiles_m: int = 8,
    tiles_n: int = 2,
    tiles_k: int = 8,
    bufs: int | None = 3,
):
    """blocked_mnk with one more rotating buffer than the compiler's default (three) and M
    blocks of 8 tiles so they fit beside the accumulator: the loads run further ahead of the
    matmuls. The compiler's double buffering already pipelines blocked_mnk, so this buys a few
    percent, not a factor."""
    _blocked_mnk(ctx, a_t, b, c, fmt, tiles_m, tiles_n, tiles_k, bufs)


def estimate_instructions(variant: str, M: int, K: int, N: int, **options) -> int:
    """About how many instructions ``variant`` records for A[M, K] @ B[K, N] (before running
    it), from its loop structure with its default block sizes: matmuls, loads, partial-sum adds,
    copies out of PSUM and stores. Used to refuse a run too large to record in seconds."""
    tk, tm, tn = (
        options.get(k, d) for k, d in (("tile_k", TILE_K), ("tile_m", TILE_M), ("tile_n", TILE_N))
    )
    if variant in ("blocked_mnk", "pipelined"):
        tk, tm, tn = TILE_K, TILE_M, TILE_N
    kt, mt, nt = -(-K // tk), -(-M // tm), -(-N // tn)
    tiles = mt * nt
    if variant == "tiled":  # two loads and a matmul per K step; a copy and a store per tile
        return tiles * (3 * kt + 2)
    if variant == "hoisted":  # A's strip once per M tile, B's once per (M, N) tile
        return mt * kt + tiles * (2 * kt + 2)
    if variant == "blocked_mn":
        bm = -(-mt // options.get("tiles_m", 2))
        return mt * kt + bm * nt * kt + tiles * (kt + 2)
    default = 16 if variant == "blocked_mnk" else 8
    blocks_m = -(-mt // options.get("tiles_m", default))
    blocks_n = -(-nt // options.get("tiles_n", 2))
    blocks_k = -(-kt // options.get("tiles_k", 8))
    loads = blocks_n * kt * (1 + blocks_m)
    return tiles * (kt + blocks_k + 1) + loads + mt * blocks_n


#: The progression, slowest first.
VARIANTS = {
    "tiled": tiled,
    "hoisted": hoisted,
    "blocked_mn": blocked_mn,
    "blocked_mnk": blocked_mnk,
    "pipelined": pipelined,
}
