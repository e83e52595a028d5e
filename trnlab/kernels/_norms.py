"""Row-wise kernels in NKI: RMSNorm, LayerNorm (bn_stats / bn_aggr) and softmax. Rows (tokens)
go on partitions, 128 at a time; each row's features along the free axis."""

from __future__ import annotations

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl

from ._matmul import _span

__all__ = ["nki_layernorm", "nki_rmsnorm", "nki_softmax"]

P = 128


def _row_on_all_partitions(vec, D):
    """A weight vector ``vec [D]`` in HBM on every partition: one DMA of the row and a Tensor
    Engine broadcast (``nl.broadcast_to``), once per kernel."""
    row = nl.ndarray((1, D), dtype=vec.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=row, src=vec.reshape((1, D)))
    return nl.broadcast_to(row, (P, D))


@nki.jit
def nki_rmsnorm(x, gamma, eps=1e-6):
    """``x / sqrt(mean(x^2) + eps) * gamma`` per row of ``x [N, D]``: the squares and their
    sum in one Scalar instruction, ``sum / D + eps`` on the Vector engine, its rsqrt on the
    Scalar engine, then the two multiplies on the Vector engine."""
    N, D = x.shape
    out = nl.ndarray((N, D), dtype=x.dtype, buffer=nl.shared_hbm)
    g = _row_on_all_partitions(gamma, D)
    for r0 in nl.affine_range(0, N, P):
        p = _span(r0, N, P)
        rows = nl.ndarray((P, D), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows[:p], src=x[r0 : r0 + p])
        squares = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
        ss = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=squares[:p], op=nl.square, data=rows[:p], reduce_op=nl.add,
                        reduce_res=ss[:p], reduce_cmd=nisa.reduce_cmd.reset_reduce)  # fmt: skip
        nisa.tensor_scalar(dst=ss[:p], data=ss[:p], op0=nl.multiply, operand0=1.0 / D,
                           op1=nl.add, operand1=eps)  # fmt: skip
        nisa.activation(dst=ss[:p], op=nl.rsqrt, data=ss[:p])
        y = nl.ndarray((P, D), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y[:p], data=rows[:p], op0=nl.multiply, operand0=ss[:p])
        nisa.tensor_tensor(dst=y[:p], data1=y[:p], data2=g[:p], op=nl.multiply)
        nisa.dma_copy(dst=out[r0 : r0 + p], src=y[:p])
    return out


@nki.jit
def nki_layernorm(x, gamma, beta, eps=1e-5):
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` per row of ``x [N, D]``: mean and
    variance from ``bn_stats`` (one per 512 features) and one ``bn_aggr``; ``1/sqrt(var+eps)``
    by a Vector add and a Scalar rsqrt; centring and scaling in one two-operator
    ``tensor_scalar``; gamma and beta by two Vector ops."""
    N, D = x.shape
    out = nl.ndarray((N, D), dtype=x.dtype, buffer=nl.shared_hbm)
    fmax = nl.tile_size.bn_stats_fmax
    chunks = -(-D // fmax)
    g = _row_on_all_partitions(gamma, D)
    b = _row_on_all_partitions(beta, D)
    for r0 in nl.affine_range(0, N, P):
        p = _span(r0, N, P)
        rows = nl.ndarray((P, D), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows[:p], src=x[r0 : r0 + p])
        stats = nl.ndarray((P, 6 * chunks), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.affine_range(chunks):
            c0 = c * fmax
            nisa.bn_stats(
                dst=stats[:p, 6 * c : 6 * c + 6], data=rows[:p, c0 : c0 + _span(c0, D, fmax)]
            )
        mean_var = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mean_var[:p], data=stats[:p])
        rstd = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=rstd[:p], data=mean_var[:p, 1:2], op0=nl.add, operand0=eps)
        nisa.activation(dst=rstd[:p], op=nl.rsqrt, data=rstd[:p])
        y = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y[:p], data=rows[:p], op0=nl.subtract, operand0=mean_var[:p, 0:1],
                           op1=nl.multiply, operand1=rstd[:p])  # fmt: skip
        nisa.tensor_tensor(dst=y[:p], data1=y[:p], data2=g[:p], op=nl.multiply)
        o = nl.ndarray((P, D), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=o[:p], data1=y[:p], data2=b[:p], op=nl.add)
        nisa.dma_copy(dst=out[r0 : r0 + p], src=o[:p])
    return out


@nki.jit
def nki_softmax(x):
    """Softmax of every row of ``x [N, D]``, numerically stable: the row maximum, negated
    (Vector ``tensor_reduce``); ``exp(x - max)`` and its row sum in one Scalar instruction;
    the reciprocal of the sum and one multiply (Vector)."""
    N, D = x.shape
    out = nl.ndarray((N, D), dtype=x.dtype, buffer=nl.shared_hbm)
    for r0 in nl.affine_range(0, N, P):
        p = _span(r0, N, P)
        rows = nl.ndarray((P, D), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows[:p], src=x[r0 : r0 + p])
        neg_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max[:p], op=nl.maximum, data=rows[:p], axis=1, negate=True)
        e = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=e[:p], op=nl.exp, data=rows[:p], bias=neg_max[:p], reduce_op=nl.add,
                        reduce_res=total[:p], reduce_cmd=nisa.reduce_cmd.reset_reduce)  # fmt: skip
        inv = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv[:p], data=total[:p])
        y = nl.ndarray((P, D), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y[:p], data=e[:p], op0=nl.multiply, operand0=inv[:p])
        nisa.dma_copy(dst=out[r0 : r0 + p], src=y[:p])
    return out
