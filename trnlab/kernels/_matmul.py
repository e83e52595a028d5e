"""The matmul progression in NKI, structured like NKI's matmul tutorial.

``C[M, N] = A[M, K] @ B[K, N]`` with A given transposed, ``lhsT[K, M]``, so both operands bring
their K rows onto SBUF partitions (the Tensor Engine contracts over partitions). Tiles are
128 (K) x 128 (M, stationary) x 512 (N, moving): 128 partitions, 128 PE columns, 512 fp32
accumulators per PSUM bank (``nl.tile_size``). Every kernel takes any M, K and N (the last
tile of a dimension may be partial) and returns ``result[M, N]`` in ``out_dtype`` (default
bfloat16, float32 for float32 / tfloat32 inputs).

Tiles declared inside a loop body get the compiler's rotating buffers (``trnlab.nki``: the
catalogue's ``compiler_rotating_buffers``, as many as SBUF holds), so each kernel here is the
tutorial's kernel as the compiler would lay it out:

``nki_matmul_tiled``        (tutorial: tiled) an A tile and a B tile loaded for every matmul,
                            small transfers one per matmul: DMA-bound.
``nki_matmul_hoisted``      (optimization 1) A's column strip (all of K) loaded once per M
                            tile, B's once per (M, N) tile; the strips take SBUF.
``nki_matmul_blocked_mn``   (optimization 2) M and N blocked (2 x 2 tiles by default): each
                            loaded tile feeds two matmuls; the block shrinks as K grows so its
                            strips fit SBUF.
``nki_matmul_blocked_mnk``  (optimization 3, "fully optimized") M, N and K blocked (16 x 2 x 8
                            tiles): wide transfers, partial sums over K blocks added into an
                            SBUF accumulator (C's dtype) by the Vector engine.

``pipelined`` in :data:`VARIANTS` is ``nki_matmul_blocked_mnk`` with blocks of 8 x 2 x 8 tiles
profiled with three rotating buffers (``kernels.matmul(..., bufs=3)``): one step past the
tutorial. On Trn1 that is one buffer more than the compiler's two; on Trn2, where the
catalogue already assumes three, only the block shape differs. Read any kernel with ``inspect.getsource``; each runs unchanged on a
Trainium instance with NKI's own imports.
"""

from __future__ import annotations

import math

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl
from trnlab.core import format_bits
from trnlab.nki._dtypes import dtype_info

__all__ = [
    "PROGRESSION",
    "VARIANTS",
    "estimate_instructions",
    "nki_matmul_blocked_mn",
    "nki_matmul_blocked_mnk",
    "nki_matmul_hoisted",
    "nki_matmul_tiled",
    "out_dtype_for",
]

TILE_K, TILE_M, TILE_N = 128, 128, 512


def out_dtype_for(dtype: str) -> str:
    """C's default dtype for inputs of ``dtype``: float32 for 32-bit inputs, else bfloat16."""
    return nl.float32 if dtype in (nl.float32, nl.tfloat32) else nl.bfloat16


def _bytes(free: int, dtype: str) -> int:
    """SBUF bytes per partition of ``free`` elements of ``dtype``."""
    return math.ceil(free * format_bits(dtype_info(dtype).fmt) / 8)


def _span(start: int, total: int, tile: int) -> int:
    return min(tile, total - start)


@nki.jit
def nki_matmul_tiled(lhsT, rhs, tile_k=TILE_K, tile_m=TILE_M, tile_n=TILE_N, out_dtype=None):
    """The textbook tiling: for every (M, N) tile and every K tile, load an A tile and a B
    tile and accumulate their product in PSUM; copy the result to SBUF and store it."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    result = nl.ndarray(
        (M, N), dtype=out_dtype or out_dtype_for(lhsT.dtype), buffer=nl.shared_hbm, name="c"
    )
    for m0 in nl.affine_range(0, M, tile_m):
        ms = _span(m0, M, tile_m)
        for n0 in nl.affine_range(0, N, tile_n):
            ns = _span(n0, N, tile_n)
            res_psum = nl.ndarray((tile_m, tile_n), dtype=nl.float32, buffer=nl.psum)
            for k0 in nl.affine_range(0, K, tile_k):
                ks = _span(k0, K, tile_k)
                lhsT_tile = nl.ndarray((tile_k, tile_m), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((tile_k, tile_n), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhsT_tile[:ks, :ms], src=lhsT[k0 : k0 + ks, m0 : m0 + ms])
                nisa.dma_copy(dst=rhs_tile[:ks, :ns], src=rhs[k0 : k0 + ks, n0 : n0 + ns])
                nisa.nc_matmul(
                    dst=res_psum[:ms, :ns],
                    stationary=lhsT_tile[:ks, :ms],
                    moving=rhs_tile[:ks, :ns],
                )
            res_sb = nl.ndarray((tile_m, tile_n), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res_sb[:ms, :ns], src=res_psum[:ms, :ns])
            nisa.dma_copy(dst=result[m0 : m0 + ms, n0 : n0 + ns], src=res_sb[:ms, :ns])
    return result


@nki.jit
def nki_matmul_hoisted(lhsT, rhs, tile_k=TILE_K, tile_m=TILE_M, tile_n=TILE_N, a_width=None,
                       out_dtype=None):  # fmt: skip
    """Loads hoisted out of the K loop: A's column strip (all of K) once per M tile, B's strip
    once per (M, N) tile. ``a_width`` is the SBUF width of each A tile (default ``tile_m``;
    the tutorial's first edition allocated ``tile_n`` columns and loaded ``tile_m`` of them)."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    wa = a_width or tile_m
    if wa < tile_m:
        raise ValueError(f"a_width {wa} is narrower than the M tile {tile_m}")
    result = nl.ndarray(
        (M, N), dtype=out_dtype or out_dtype_for(lhsT.dtype), buffer=nl.shared_hbm, name="c"
    )
    for m0 in nl.affine_range(0, M, tile_m):
        ms = _span(m0, M, tile_m)
        lhsT_tiles = []
        for k0 in nl.affine_range(0, K, tile_k):
            ks = _span(k0, K, tile_k)
            lhsT_tile = nl.ndarray((tile_k, wa), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=lhsT_tile[:ks, :ms], src=lhsT[k0 : k0 + ks, m0 : m0 + ms])
            lhsT_tiles.append(lhsT_tile)
        for n0 in nl.affine_range(0, N, tile_n):
            ns = _span(n0, N, tile_n)
            rhs_tiles = []
            for k0 in nl.affine_range(0, K, tile_k):
                ks = _span(k0, K, tile_k)
                rhs_tile = nl.ndarray((tile_k, tile_n), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=rhs_tile[:ks, :ns], src=rhs[k0 : k0 + ks, n0 : n0 + ns])
                rhs_tiles.append(rhs_tile)
            res_psum = nl.ndarray((tile_m, tile_n), dtype=nl.float32, buffer=nl.psum)
            for j, k0 in enumerate(nl.affine_range(0, K, tile_k)):
                ks = _span(k0, K, tile_k)
                nisa.nc_matmul(
                    dst=res_psum[:ms, :ns],
                    stationary=lhsT_tiles[j][:ks, :ms],
                    moving=rhs_tiles[j][:ks, :ns],
                )
            res_sb = nl.ndarray((tile_m, tile_n), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res_sb[:ms, :ns], src=res_psum[:ms, :ns])
            nisa.dma_copy(dst=result[m0 : m0 + ms, n0 : n0 + ns], src=res_sb[:ms, :ns])
    return result


def fit_mn_blocks(K, dtype, out_dtype, tile, tiles_m, tiles_n, capacity) -> tuple[int, int]:
    """Shrink the (M, N) block (halving N first, then M) until one buffer of each of its
    strips over all of K, plus two output tiles, fits ``capacity`` bytes per partition."""
    tile_k, tile_m, tile_n = tile
    kt = -(-K // tile_k)

    def need(tm, tn):
        return kt * (tm * _bytes(tile_m, dtype) + tn * _bytes(tile_n, dtype)) + 2 * _bytes(
            tile_n, out_dtype
        )

    while need(tiles_m, tiles_n) > capacity and (tiles_m > 1 or tiles_n > 1):
        if tiles_n >= tiles_m and tiles_n > 1:
            tiles_n = max(1, tiles_n // 2)
        else:
            tiles_m = max(1, tiles_m // 2)
    return tiles_m, tiles_n


@nki.jit
def nki_matmul_blocked_mn(lhsT, rhs, tiles_m=2, tiles_n=2, tile_k=TILE_K, tile_m=TILE_M,
                          tile_n=TILE_N, out_dtype=None):  # fmt: skip
    """Blocks of ``tiles_m`` M tiles and ``tiles_n`` N tiles resident in SBUF over all of K:
    each loaded A tile feeds ``tiles_n`` matmuls, each B tile ``tiles_m``."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    result = nl.ndarray(
        (M, N), dtype=out_dtype or out_dtype_for(lhsT.dtype), buffer=nl.shared_hbm, name="c"
    )
    tiles_m, tiles_n = fit_mn_blocks(
        K,
        lhsT.dtype,
        result.dtype,
        (tile_k, tile_m, tile_n),
        tiles_m,
        tiles_n,
        nl.tile_size.sbuf_fmax_bytes,
    )
    block_m, block_n = tiles_m * tile_m, tiles_n * tile_n
    for bm0 in nl.affine_range(0, M, block_m):
        m_tiles = [(m0, _span(m0, M, tile_m)) for m0 in range(bm0, min(M, bm0 + block_m), tile_m)]
        lhsT_tiles = []
        for m0, ms in m_tiles:
            row = []
            for k0 in nl.affine_range(0, K, tile_k):
                ks = _span(k0, K, tile_k)
                lhsT_tile = nl.ndarray((tile_k, tile_m), dtype=lhsT.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhsT_tile[:ks, :ms], src=lhsT[k0 : k0 + ks, m0 : m0 + ms])
                row.append(lhsT_tile)
            lhsT_tiles.append(row)
        for bn0 in nl.affine_range(0, N, block_n):
            n_tiles = [
                (n0, _span(n0, N, tile_n)) for n0 in range(bn0, min(N, bn0 + block_n), tile_n)
            ]
            rhs_tiles = []
            for n0, ns in n_tiles:
                row = []
                for k0 in nl.affine_range(0, K, tile_k):
                    ks = _span(k0, K, tile_k)
                    rhs_tile = nl.ndarray((tile_k, tile_n), dtype=rhs.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=rhs_tile[:ks, :ns], src=rhs[k0 : k0 + ks, n0 : n0 + ns])
                    row.append(rhs_tile)
                rhs_tiles.append(row)
            for i, (m0, ms) in enumerate(m_tiles):
                for q, (n0, ns) in enumerate(n_tiles):
                    res_psum = nl.ndarray((tile_m, tile_n), dtype=nl.float32, buffer=nl.psum)
                    for j, k0 in enumerate(nl.affine_range(0, K, tile_k)):
                        ks = _span(k0, K, tile_k)
                        nisa.nc_matmul(
                            dst=res_psum[:ms, :ns],
                            stationary=lhsT_tiles[i][j][:ks, :ms],
                            moving=rhs_tiles[q][j][:ks, :ns],
                        )
                    res_sb = nl.ndarray((tile_m, tile_n), dtype=result.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=res_sb[:ms, :ns], src=res_psum[:ms, :ns])
                    nisa.dma_copy(dst=result[m0 : m0 + ms, n0 : n0 + ns], src=res_sb[:ms, :ns])
    return result


def fit_mnk_blocks(M, N, K, dtype, out_dtype, tiles, capacity) -> tuple[int, int, int]:
    """Shrink the (M, N, K) block (K first, then N, then M) until one buffer each of the
    accumulator (all of M x the N block), the B block, the A block and an output row fits
    ``capacity`` bytes per partition."""
    tiles_m, tiles_n, tiles_k = tiles
    mt = -(-M // TILE_M)

    def need(tm, tn, tk):
        bm = min(tm * TILE_M, mt * TILE_M)
        bn = min(tn * TILE_N, -(-N // TILE_N) * TILE_N)
        bk = min(tk * TILE_K, -(-K // TILE_K) * TILE_K)
        return (
            mt * _bytes(bn, out_dtype)
            + (bk // TILE_K) * (_bytes(bn, dtype) + _bytes(bm, dtype))
            + _bytes(bn, out_dtype)
        )

    while need(tiles_m, tiles_n, tiles_k) > capacity:
        if tiles_k > 2:
            tiles_k //= 2
        elif tiles_n > 1:
            tiles_n //= 2
        elif tiles_m > 1:
            tiles_m //= 2
        else:
            break
    return tiles_m, tiles_n, tiles_k


@nki.jit
def nki_matmul_blocked_mnk(lhsT, rhs, TILES_IN_BLOCK_M=16, TILES_IN_BLOCK_N=2,
                           TILES_IN_BLOCK_K=8, out_dtype=None):  # fmt: skip
    """Blocks over M, N and K (the tutorial's fully optimized kernel): for each N block an SBUF
    accumulator holds every M tile; for each K block, B's block is loaded once; for each M
    block, A's block; every (N tile, M tile) PSUM group is added into the accumulator by the
    Vector engine (copied, for the first K block). The blocks shrink to fit SBUF."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    result = nl.ndarray(
        (M, N), dtype=out_dtype or out_dtype_for(lhsT.dtype), buffer=nl.shared_hbm, name="c"
    )
    tm, tn, tk = fit_mnk_blocks(
        M,
        N,
        K,
        lhsT.dtype,
        result.dtype,
        (TILES_IN_BLOCK_M, TILES_IN_BLOCK_N, TILES_IN_BLOCK_K),
        nl.tile_size.sbuf_fmax_bytes,
    )
    mt = -(-M // TILE_M)
    block_m = min(tm * TILE_M, mt * TILE_M)
    block_n = min(tn * TILE_N, -(-N // TILE_N) * TILE_N)
    block_k = min(tk * TILE_K, -(-K // TILE_K) * TILE_K)
    k_tiles = block_k // TILE_K
    for bn0 in nl.affine_range(0, N, block_n):
        bns = _span(bn0, N, block_n)
        n_tiles = [(n0, _span(n0, bns, TILE_N)) for n0 in range(0, bns, TILE_N)]
        # the accumulator: M tile i holds its N block at columns i * block_n ...
        acc = nl.ndarray((TILE_M, mt * block_n), dtype=result.dtype, buffer=nl.sbuf)
        for kb, bk0 in enumerate(nl.sequential_range(0, K, block_k)):
            bks = _span(bk0, K, block_k)
            k_spans = [(k0, _span(k0, bks, TILE_K)) for k0 in range(0, bks, TILE_K)]
            rhs_block = nl.ndarray((TILE_K, k_tiles * block_n), dtype=rhs.dtype, buffer=nl.sbuf)
            for j, (k0, ks) in enumerate(k_spans):
                nisa.dma_copy(
                    dst=rhs_block[:ks, j * block_n : j * block_n + bns],
                    src=rhs[bk0 + k0 : bk0 + k0 + ks, bn0 : bn0 + bns],
                )
            for bm0 in nl.affine_range(0, M, block_m):
                bms = _span(bm0, M, block_m)
                lhsT_block = nl.ndarray(
                    (TILE_K, k_tiles * block_m), dtype=lhsT.dtype, buffer=nl.sbuf
                )
                for j, (k0, ks) in enumerate(k_spans):
                    nisa.dma_copy(
                        dst=lhsT_block[:ks, j * block_m : j * block_m + bms],
                        src=lhsT[bk0 + k0 : bk0 + k0 + ks, bm0 : bm0 + bms],
                    )
                for n0, ns in n_tiles:  # the tutorial's order: N tiles, M tiles, K tiles
                    for m0 in nl.affine_range(0, bms, TILE_M):
                        ms = _span(m0, bms, TILE_M)
                        res_psum = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                        for j, (_, ks) in enumerate(k_spans):
                            a0, b0 = j * block_m + m0, j * block_n + n0
                            nisa.nc_matmul(
                                dst=res_psum[:ms, :ns],
                                stationary=lhsT_block[:ks, a0 : a0 + ms],
                                moving=rhs_block[:ks, b0 : b0 + ns],
                            )
                        col = ((bm0 + m0) // TILE_M) * block_n + n0
                        part = acc[:ms, col : col + ns]
                        if kb == 0:
                            nisa.tensor_copy(dst=part, src=res_psum[:ms, :ns])
                        else:
                            nisa.tensor_tensor(dst=part, data1=part, data2=res_psum[:ms, :ns],
                                               op=nl.add)  # fmt: skip
        for i, m0 in enumerate(nl.affine_range(0, M, TILE_M)):
            ms = _span(m0, M, TILE_M)
            res_sb = nl.ndarray((TILE_M, block_n), dtype=result.dtype, buffer=nl.sbuf)
            for n0, ns in n_tiles:
                c0 = i * block_n + n0
                nisa.tensor_copy(dst=res_sb[:ms, n0 : n0 + ns], src=acc[:ms, c0 : c0 + ns])
            nisa.dma_copy(dst=result[m0 : m0 + ms, bn0 : bn0 + bns], src=res_sb[:ms, :bns])
    return result


def estimate_instructions(variant: str, M: int, K: int, N: int, **options) -> int:
    """About how many instructions ``variant`` records for A[M, K] @ B[K, N], before running it:
    from the kernel's loops with its block sizes (before they shrink to fit SBUF): matmuls,
    loads, partial-sum adds, copies out of PSUM and stores. Used to refuse a run too large to
    record in seconds, with the estimate."""
    opts = {**PROGRESSION[variant][1], **options}
    tk, tm, tn = (
        int(opts.get(k, d)) for k, d in (("tile_k", TILE_K), ("tile_m", TILE_M), ("tile_n", TILE_N))
    )
    kt, mt, nt = -(-K // tk), -(-M // tm), -(-N // tn)
    tiles = mt * nt
    if variant == "tiled":  # two loads and a matmul per K step; a copy and a store per tile
        return tiles * (3 * kt + 2)
    if variant == "hoisted":  # A's strip once per M tile, B's once per (M, N) tile
        return mt * kt + tiles * (2 * kt + 2)
    if variant == "blocked_mn":
        blocks_m = -(-mt // int(opts.get("tiles_m", 2)))
        return mt * kt + blocks_m * nt * kt + tiles * (kt + 2)
    blocks_m = -(-mt // int(opts.get("TILES_IN_BLOCK_M", 16)))
    blocks_n = -(-nt // int(opts.get("TILES_IN_BLOCK_N", 2)))
    blocks_k = -(-kt // int(opts.get("TILES_IN_BLOCK_K", 8)))
    loads = blocks_n * kt * (1 + blocks_m)
    return tiles * (kt + blocks_k + 1) + loads + mt * blocks_n


#: The progression, slowest first: variant -> (NKI kernel, its options, rotating buffers).
PROGRESSION = {
    "tiled": (nki_matmul_tiled, {}, None),
    "hoisted": (nki_matmul_hoisted, {}, None),
    "blocked_mn": (nki_matmul_blocked_mn, {}, None),
    "blocked_mnk": (nki_matmul_blocked_mnk, {}, None),
    "pipelined": (
        nki_matmul_blocked_mnk,
        {"TILES_IN_BLOCK_M": 8, "TILES_IN_BLOCK_N": 2, "TILES_IN_BLOCK_K": 8},
        3,
    ),
}

#: The progression, slowest first: variant name -> its NKI kernel.
VARIANTS = {name: kernel for name, (kernel, _, _) in PROGRESSION.items()}
