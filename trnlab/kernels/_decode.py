"""Decode attention in NKI: one new token's query heads against a KV cache of S positions.

During token generation each NeuronCore holds some KV heads of every layer and, per KV head,
the query heads that share it (grouped-query attention: ``h`` of them, often 1 or 2 per core).
One step computes, for those ``h`` queries, ``softmax(q k^T / sqrt(d)) v`` over every cached
key. The queries are few, so the work is a walk over the cache: the keys and values stream in
from HBM and every score row is as long as the context.

Layout as in :mod:`._attention`: ``q_t [d, h]`` and ``k_t [d, S]`` with the head dimension on
partitions, ``v [S, d]``; the output is ``[h, d]``. The cache is walked in blocks of
:data:`BLOCK` keys; inside a block the softmax is taken over the whole block at once (its
scores fit SBUF), between blocks the running maximum, sum and accumulator are corrected as in
flash attention:

    S_b = q k_b^T / sqrt(d)              Tensor Engine, 512 keys per matmul, scaled out of PSUM
    m' = max(m, rowmax(S_b))             Vector, one reduction over the block
    P = exp(S_b - m'), rowsum(P)         one Scalar activation with reduce over the block
    l = l * exp(m - m') + rowsum(P)
    acc = acc * exp(m - m') + P v_b      P transposed per 128 keys, then P^T as stationary
    out = acc / l
"""

from __future__ import annotations

import math

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl

from ._attention import _attend_block, _load_v, _online_state
from ._matmul import _span

__all__ = ["BLOCK", "nki_decode_attention"]

BLOCK = 4096  # keys per block: fp32 scores of a block take 16 KiB of each partition
_MM = 512  # keys per score matmul (one PSUM bank of fp32)


@nki.jit
def nki_decode_attention(q_t, k_t, v):
    """``softmax(q k^T / sqrt(d)) v`` for the ``h`` query heads of one KV head (see the
    module docstring): ``q_t [d, h]``, ``k_t [d, S]``, ``v [S, d]`` -> ``[h, d]``."""
    d, h = q_t.shape
    S = k_t.shape[1]
    if d > nl.tile_size.pmax or h > nl.tile_size.pmax:
        raise ValueError(f"head dimension {d} and query heads {h} each go on <= 128 partitions")
    dt = q_t.dtype
    scale = 1.0 / math.sqrt(d)
    out = nl.ndarray((h, d), dtype=dt, buffer=nl.shared_hbm)
    q = nl.ndarray((d, h), dtype=dt, buffer=nl.sbuf)
    nisa.dma_copy(dst=q, src=q_t)
    m, l_sum, acc = _online_state(h, d)
    for b0 in nl.sequential_range(0, S, BLOCK):
        bs = _span(b0, S, BLOCK)
        k_blk = nl.ndarray((d, BLOCK), dtype=dt, buffer=nl.sbuf)
        nisa.dma_copy(dst=k_blk[:, :bs], src=k_t[:, b0 : b0 + bs])
        v_blk = nl.ndarray((128, BLOCK // 128, d), dtype=dt, buffer=nl.sbuf)
        _load_v(v_blk, v, b0, bs)
        scores = nl.ndarray((h, BLOCK), dtype=nl.float32, buffer=nl.sbuf)
        for s0 in nl.affine_range(0, bs, _MM):
            ss = _span(s0, bs, _MM)
            s_psum = nl.ndarray((h, _MM), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=s_psum[:, :ss], stationary=q, moving=k_blk[:, s0 : s0 + ss])
            nisa.activation(dst=scores[:, s0 : s0 + ss], op=nl.copy, data=s_psum[:, :ss],
                            scale=scale)  # fmt: skip
        _attend_block(scores, m, l_sum, acc, v_blk, 0, slice(0, h), bs, dt)
    inv = nl.ndarray((h, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.reciprocal(dst=inv, data=l_sum)
    o_tile = nl.ndarray((h, d), dtype=dt, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=o_tile, data=acc, op0=nl.multiply, operand0=inv)
    nisa.dma_copy(dst=out, src=o_tile)
    return out
