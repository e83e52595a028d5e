"""Transposes in NKI: a matrix through the Tensor Engine, and NKI's transpose2d tutorial problem
(each row a flattened f1 x f2 matrix, transposed along the free axis) with one strided copy."""

from __future__ import annotations

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl

from ._matmul import _span

__all__ = ["nki_transpose", "nki_transpose2d"]

BLOCK = 128


@nki.jit
def nki_transpose(x):
    """``y[C, R] = x[R, C].T`` block by block: load a [128, 128] block (rows on partitions),
    transpose it on the Tensor Engine into PSUM (a matmul against the identity), copy it out
    (alternating the Vector and Scalar engines), store it to ``y[c, r]``."""
    R, C = x.shape
    y = nl.ndarray((C, R), dtype=x.dtype, buffer=nl.shared_hbm)
    step = 0
    for r0 in nl.affine_range(0, R, BLOCK):
        rs = _span(r0, R, BLOCK)
        for c0 in nl.affine_range(0, C, BLOCK):
            cs = _span(c0, C, BLOCK)
            x_tile = nl.ndarray((BLOCK, BLOCK), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=x_tile[:rs, :cs], src=x[r0 : r0 + rs, c0 : c0 + cs])
            t_psum = nl.ndarray((BLOCK, BLOCK), dtype=x.dtype, buffer=nl.psum)
            nisa.nc_transpose(
                dst=t_psum[:cs, :rs], data=x_tile[:rs, :cs], engine=nisa.engine.tensor
            )
            y_tile = nl.ndarray((BLOCK, BLOCK), dtype=y.dtype, buffer=nl.sbuf)
            if step % 2 == 0:
                nisa.tensor_copy(dst=y_tile[:cs, :rs], src=t_psum[:cs, :rs])
            else:
                nisa.activation(dst=y_tile[:cs, :rs], op=nl.copy, data=t_psum[:cs, :rs])
            nisa.dma_copy(dst=y[c0 : c0 + cs, r0 : r0 + rs], src=y_tile[:cs, :rs])
            step += 1
    return y


@nki.jit
def nki_transpose2d(in_tensor, shape2D):
    """Each row of ``in_tensor [P, f1 * f2]`` is a row-major f1 x f2 matrix; return them
    transposed (f2 x f1, row-major). Rows go on partitions (128 at a time); the transpose is
    one Vector-engine copy that reads the tile through a permuted (strided) view."""
    P, F = in_tensor.shape
    f1, f2 = shape2D
    if f1 * f2 != F:
        raise ValueError(f"shape2D {shape2D} does not hold the {F} elements of a row")
    out = nl.ndarray((P, F), dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    for p0 in nl.affine_range(0, P, BLOCK):
        ps = _span(p0, P, BLOCK)
        rows = nl.ndarray((BLOCK, f1, f2), dtype=in_tensor.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows[:ps], src=in_tensor[p0 : p0 + ps, :])
        swapped = nl.ndarray((BLOCK, f2, f1), dtype=in_tensor.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=swapped[:ps], src=rows[:ps].permute((0, 2, 1)))
        nisa.dma_copy(dst=out[p0 : p0 + ps, :], src=swapped[:ps])
    return out
