"""Elementwise kernels in NKI: an SPMD tensor add (one program per tile of a launch grid) and
2-D average pooling (channels on partitions, each window reduced through a strided view)."""

from __future__ import annotations

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl

from ._matmul import _span

__all__ = ["TILE", "nki_avgpool2d", "nki_tensor_add"]

#: The block one program of the tensor add handles: 128 rows (partitions) x 512 columns.
TILE = (128, 512)


@nki.jit
def nki_tensor_add(a, b):
    """``a + b`` as an SPMD kernel: launch it on a grid ``nki_tensor_add[gm, gn]`` with
    ``gm = ceil(M / 128)``, ``gn = ceil(N / 512)``; program (i, j) adds block (i, j)."""
    M, N = a.shape
    out = nl.ndarray((M, N), dtype=a.dtype, buffer=nl.shared_hbm)
    tm, tn = TILE
    m0 = nl.program_id(0) * tm
    n0 = nl.program_id(1) * tn
    ms, ns = _span(m0, M, tm), _span(n0, N, tn)
    a_tile = nl.ndarray((tm, tn), dtype=a.dtype, buffer=nl.sbuf)
    b_tile = nl.ndarray((tm, tn), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_tile[:ms, :ns], src=a[m0 : m0 + ms, n0 : n0 + ns])
    nisa.dma_copy(dst=b_tile[:ms, :ns], src=b[m0 : m0 + ms, n0 : n0 + ns])
    c_tile = nl.ndarray((tm, tn), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=c_tile[:ms, :ns], data1=a_tile[:ms, :ns], data2=b_tile[:ms, :ns],
                       op=nl.add)  # fmt: skip
    nisa.dma_copy(dst=out[m0 : m0 + ms, n0 : n0 + ns], src=c_tile[:ms, :ns])
    return out


@nki.jit
def nki_avgpool2d(x, pool_size):
    """Average pooling of ``x [C, H, W]`` over ``pool_size x pool_size`` windows (stride the
    window; trailing rows/columns that do not fill a window are dropped): channels on
    partitions, the windows reduced in one Vector instruction through a 5-D view
    ``[C, H/ps, W/ps, ps, ps]`` of the tile, then scaled by 1 / ps^2."""
    C, H, W = x.shape
    ps = pool_size
    ho, wo = H // ps, W // ps
    out = nl.ndarray((C, ho, wo), dtype=x.dtype, buffer=nl.shared_hbm)
    for c0 in nl.affine_range(0, C, 128):
        cs = _span(c0, C, 128)
        image = nl.ndarray((128, H, W), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=image[:cs], src=x[c0 : c0 + cs])
        windows = (
            image[:cs, : ho * ps, : wo * ps]
            .reshape_dim(2, (wo, ps))
            .reshape_dim(1, (ho, ps))
            .permute((0, 1, 3, 2, 4))
        )
        sums = nl.ndarray((128, ho, wo), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=sums[:cs], op=nl.add, data=windows, axis=(3, 4))
        means = nl.ndarray((128, ho, wo), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=means[:cs], data=sums[:cs], op0=nl.multiply,
                           operand0=1.0 / (ps * ps))  # fmt: skip
        nisa.dma_copy(dst=out[c0 : c0 + cs], src=means[:cs])
    return out
