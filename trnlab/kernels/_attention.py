"""Fused self-attention in NKI, tiled over the sequence with an online softmax (the
flash-attention algorithm of Dao et al. 2022): ``softmax(q k^T / sqrt(d)) v`` for one head,
without ever holding the full score matrix.

Layout: ``q_t [d, S]`` and ``k_t [d, S_kv]`` come transposed (head dimension on partitions, so
``q_tile^T k_tile`` is one matmul contracting over d <= 128), ``v [S_kv, d]``; the output is
``[S, d]``. For each tile of 128 queries the kernel walks the key/value tiles of 512, keeping
per query row a running maximum ``m``, a running sum ``l`` and an accumulator of ``P v``:

    S = q k^T / sqrt(d)                  Tensor Engine into PSUM, scaled on the way out (Scalar)
    m' = max(m, rowmax(S))               Vector
    P = exp(S - m'), rowsum(P)           one Scalar instruction (activation with reduce)
    c = exp(m - m')                      Scalar: the correction of what was accumulated so far
    l = l * c + rowsum(P)                one Vector tensor_scalar
    acc = acc * c + P v                  P transposed per 128 keys on the Tensor Engine, then
                                         P^T as stationary against v; one Vector pass each
    out = acc / l

With ``causal=True`` a query attends to keys at or before its position: the scores above the
diagonal are masked by one GpSimd ``affine_select`` and key tiles wholly above it are skipped.
"""

from __future__ import annotations

import math

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl

from ._matmul import _bytes, _span

__all__ = ["attention_reference", "nki_attention"]

Q_TILE, KV_TILE = 128, 512
_NEG = -30000.0  # "minus infinity" for the running max and masked scores (exp gives 0)


def attention_reference(q, k, v, causal: bool = False):
    """``softmax(q k^T / sqrt(d)) v`` in numpy float64 (q [S, d], k and v [S_kv, d])."""
    import numpy as np

    from ._shapes import need_flag, need_shapes

    causal = need_flag(causal, "causal")
    q, k, v = need_shapes({"q": q, "k": k, "v": v}, {"q": "S d", "k": "T d", "v": "T d"})
    s = q @ k.T / math.sqrt(q.shape[1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape, bool)), s, -np.inf)
    s -= s.max(axis=1, keepdims=True)
    p = np.exp(s)
    return (p / p.sum(axis=1, keepdims=True)) @ v


@nki.jit
def nki_attention(q_t, k_t, v, causal=False):
    """Single-head attention ``softmax(q k^T / sqrt(d)) v`` (see the module docstring):
    ``q_t [d, S]``, ``k_t [d, S_kv]``, ``v [S_kv, d]`` -> ``[S, d]``."""
    d, S = q_t.shape
    S_kv = k_t.shape[1]
    if d > nl.tile_size.pmax:
        raise ValueError(f"head dimension {d} exceeds {nl.tile_size.pmax}: it goes on partitions")
    dt = q_t.dtype
    scale = 1.0 / math.sqrt(d)
    out = nl.ndarray((S, d), dtype=dt, buffer=nl.shared_hbm)
    kv_chunks = -(-S_kv // 128)
    # K^T and V stay in SBUF for every query tile when they take at most a quarter of it
    resident = (S_kv + kv_chunks * d) * _bytes(1, dt) <= nl.tile_size.sbuf_fmax_bytes // 4
    if resident:
        k_all = nl.ndarray((d, S_kv), dtype=dt, buffer=nl.sbuf)
        nisa.dma_copy(dst=k_all, src=k_t)
        v_all = nl.ndarray((128, kv_chunks, d), dtype=dt, buffer=nl.sbuf)
        _load_v(v_all, v, 0, S_kv)
    for q0 in nl.affine_range(0, S, Q_TILE):
        qs = _span(q0, S, Q_TILE)
        q_tile = nl.ndarray((d, Q_TILE), dtype=dt, buffer=nl.sbuf)
        nisa.dma_copy(dst=q_tile[:, :qs], src=q_t[:, q0 : q0 + qs])
        m, l_sum, acc = _online_state(Q_TILE, d)
        kv_end = min(S_kv, q0 + qs) if causal else S_kv
        for kv0 in nl.sequential_range(0, kv_end, KV_TILE):
            ks = _span(kv0, kv_end, KV_TILE)
            if resident:
                k_tile, v_tile, c_first = k_all[:, kv0 : kv0 + ks], v_all, kv0 // 128
            else:
                k_tile = nl.ndarray((d, KV_TILE), dtype=dt, buffer=nl.sbuf)
                nisa.dma_copy(dst=k_tile[:, :ks], src=k_t[:, kv0 : kv0 + ks])
                k_tile = k_tile[:, :ks]
                v_tile = nl.ndarray((128, KV_TILE // 128, d), dtype=dt, buffer=nl.sbuf)
                _load_v(v_tile, v, kv0, ks)
                c_first = 0
            s_psum = nl.ndarray((Q_TILE, KV_TILE), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=s_psum[:qs, :ks], stationary=q_tile[:, :qs], moving=k_tile)
            scores = nl.ndarray((Q_TILE, KV_TILE), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=scores[:qs, :ks], op=nl.copy, data=s_psum[:qs, :ks], scale=scale)
            if causal and kv0 + ks > q0:  # keep key f where (q0 + p) - (kv0 + f) >= 0
                nisa.affine_select(dst=scores[:qs, :ks], pattern=[[-1, ks]], channel_multiplier=1,
                                   on_true_tile=scores[:qs, :ks], on_false_value=_NEG,
                                   cmp_op=nl.greater_equal, offset=q0 - kv0)  # fmt: skip
            _attend_block(scores, m, l_sum, acc, v_tile, c_first, slice(0, qs), ks, dt)
        inv = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv[:qs], data=l_sum[:qs])
        o_tile = nl.ndarray((Q_TILE, d), dtype=dt, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=o_tile[:qs], data=acc[:qs], op0=nl.multiply, operand0=inv[:qs])
        nisa.dma_copy(dst=out[q0 : q0 + qs, :], src=o_tile[:qs])
    return out


def _online_state(rows, width):
    """The running state of an online softmax over ``rows`` query rows: the maximum (minus
    infinity), the sum (0) and the accumulator of ``P v`` (``rows x width``, 0)."""
    m = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=m, value=_NEG)
    l_sum = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=l_sum, value=0.0)
    acc = nl.ndarray((rows, width), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    return m, l_sum, acc


def _attend_block(scores, m, l_sum, acc, v_tile, c_first, rows, ks, dt):
    """One key block of an online softmax (flash attention) for the query rows ``rows`` (a
    slice): from this block's ``scores[rows, :ks]`` the running maximum ``m`` and sum
    ``l_sum`` move on, and ``acc`` becomes ``acc * exp(m_old - m_new) + P v`` with
    ``P = exp(scores - m_new)`` transposed per 128 keys (``v_tile`` chunks from
    ``c_first``). Shared by :func:`nki_attention` and the decode kernel."""
    n, width = scores.shape[0], acc.shape[1]
    block_max = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=block_max[rows], op=nl.maximum, data=scores[rows, :ks], axis=1)
    m_new = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=m_new[rows], data1=m[rows], data2=block_max[rows], op=nl.maximum)
    neg_m = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=neg_m[rows], data=m_new[rows], op0=nl.multiply, operand0=-1.0)
    probs = nl.ndarray(scores.shape, dtype=dt, buffer=nl.sbuf)
    row_sum = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=probs[rows, :ks], op=nl.exp, data=scores[rows, :ks], bias=neg_m[rows],
                    reduce_op=nl.add, reduce_res=row_sum[rows],
                    reduce_cmd=nisa.reduce_cmd.reset_reduce)  # fmt: skip
    corr = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=corr[rows], op=nl.exp, data=m[rows], bias=neg_m[rows])
    nisa.tensor_scalar(dst=l_sum[rows], data=l_sum[rows], op0=nl.multiply,
                       operand0=corr[rows], op1=nl.add, operand1=row_sum[rows])  # fmt: skip
    nisa.tensor_copy(dst=m[rows], src=m_new[rows])
    pv_psum = nl.ndarray((n, width), dtype=nl.float32, buffer=nl.psum)
    for c, c0 in enumerate(nl.affine_range(0, ks, 128)):
        cs = _span(c0, ks, 128)
        pt_psum = nl.ndarray((128, n), dtype=dt, buffer=nl.psum)
        nisa.nc_transpose(dst=pt_psum[:cs, rows], data=probs[rows, c0 : c0 + cs],
                          engine=nisa.engine.tensor)  # fmt: skip
        probs_t = nl.ndarray((128, n), dtype=dt, buffer=nl.sbuf)
        nisa.tensor_copy(dst=probs_t[:cs, rows], src=pt_psum[:cs, rows])
        nisa.nc_matmul(dst=pv_psum[rows], stationary=probs_t[:cs, rows],
                       moving=v_tile[:cs, c_first + c, :])  # fmt: skip
    nisa.tensor_scalar(dst=acc[rows], data=acc[rows], op0=nl.multiply, operand0=corr[rows])
    nisa.tensor_tensor(dst=acc[rows], data1=acc[rows], data2=pv_psum[rows], op=nl.add)


def _load_v(dst, v, start, size):
    """Rows ``start .. start + size`` of ``v [S_kv, d]`` into ``dst [128, chunks, d]`` with key
    ``start + c * 128 + p`` on partition p of chunk c: one DMA for the whole chunks (a
    permuted view of v) and one for the rest."""
    d = v.shape[1]
    full = size // 128
    if full:
        rows = v[start : start + full * 128].reshape((full, 128, d)).permute((1, 0, 2))
        nisa.dma_copy(dst=dst[:, 0:full, :], src=rows)
    rest = size - full * 128
    if rest:
        nisa.dma_copy(dst=dst[:rest, full, :], src=v[start + full * 128 : start + size])
