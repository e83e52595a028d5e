"""A matmul with a fused epilogue in NKI: bias + activation on the Scalar engine, straight
out of PSUM (no second pass over C)."""

from __future__ import annotations

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl

from ._matmul import TILE_K, TILE_M, TILE_N, _span

__all__ = ["nki_matmul_bias_act"]


@nki.jit
def nki_matmul_bias_act(w, x_t, bias, activation=nl.relu, out_dtype=nl.float32):
    """``y_t[N, M] = activation(w[K, N].T @ x_t[K, M] + bias[N, 1])``.

    N (output features) goes on partitions, so the bias is one value per partition: the Scalar
    engine computes ``activation(psum * 1 + bias)`` as it moves each result out of PSUM."""
    K, N = w.shape
    M = x_t.shape[1]
    y_t = nl.ndarray((N, M), dtype=out_dtype, buffer=nl.shared_hbm)
    for n0 in nl.affine_range(0, N, TILE_M):
        ns = _span(n0, N, TILE_M)
        bias_tile = nl.ndarray((TILE_M, 1), dtype=bias.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=bias_tile[:ns, :], src=bias[n0 : n0 + ns, :])
        w_tiles = []
        for k0 in nl.affine_range(0, K, TILE_K):
            ks = _span(k0, K, TILE_K)
            w_tile = nl.ndarray((TILE_K, TILE_M), dtype=w.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=w_tile[:ks, :ns], src=w[k0 : k0 + ks, n0 : n0 + ns])
            w_tiles.append(w_tile)
        for m0 in nl.affine_range(0, M, TILE_N):
            ms = _span(m0, M, TILE_N)
            x_tiles = []
            for k0 in nl.affine_range(0, K, TILE_K):
                ks = _span(k0, K, TILE_K)
                x_tile = nl.ndarray((TILE_K, TILE_N), dtype=x_t.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=x_tile[:ks, :ms], src=x_t[k0 : k0 + ks, m0 : m0 + ms])
                x_tiles.append(x_tile)
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for j, k0 in enumerate(nl.affine_range(0, K, TILE_K)):
                ks = _span(k0, K, TILE_K)
                nisa.nc_matmul(
                    dst=acc[:ns, :ms], stationary=w_tiles[j][:ks, :ns], moving=x_tiles[j][:ks, :ms]
                )
            y_tile = nl.ndarray((TILE_M, TILE_N), dtype=y_t.dtype, buffer=nl.sbuf)
            nisa.activation(
                dst=y_tile[:ns, :ms], op=activation, data=acc[:ns, :ms], bias=bias_tile[:ns, :]
            )
            nisa.dma_copy(dst=y_t[n0 : n0 + ns, m0 : m0 + ms], src=y_tile[:ns, :ms])
    return y_t
