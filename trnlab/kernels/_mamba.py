"""Mamba's selective scan (the SSM of Mamba v1) in NKI, in the three versions of NKI's
fused-Mamba tutorial (batch 1).

For every channel c and state s: ``x[c, t] = exp(delta[c, t] * A[c, s]) * x[c, t - 1] +
delta[c, t] * u[c, t] * B[s, t]`` (x starting at 0), and the output sums ``x[c, t] * C[s, t]``
over the states. Channels go on partitions (128 per tile), time on the free axis; the
recurrence is one Vector-engine ``tensor_tensor_scan`` per (channel tile, state); the rows of B
and C (one per state) reach all 128 partitions through ``nl.broadcast_to`` (a Tensor Engine
matmul with a row of ones into PSUM).

``v1``  states outside, channel tiles inside: delta and u are loaded again for every state.
``v2``  channel tiles outside: delta and u loaded once per channel tile, reused by all states.
``v3``  as v2, with the time axis in chunks of ``chunk`` (512) so every tile stays small; the
        scan carries its last column from chunk to chunk.

``hoist`` computes delta x u once per channel tile (v2, v3) instead of once per state. The
compiler does that by itself (it computes an instruction that repeats an earlier one on the
same inputs once: ``trnlab.nki._reuse``), so both forms take the same time; ``hoist=True``
writes it out, as a kernel engineer would, and stays fast on a core whose ``compiler_cse`` is
off.
"""

from __future__ import annotations

import numpy as np

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl

from ._shapes import need_shapes

__all__ = ["VERSIONS", "nki_selective_scan", "selective_scan_reference"]

P = 128
VERSIONS = ("v1", "v2", "v3")


def selective_scan_reference(delta, u, a, b, c) -> np.ndarray:
    """The selective scan in numpy (float64): ``delta, u [channels, T]``, ``a [channels, S]``,
    ``b, c [S, T]``; returns ``[channels, T]``."""
    delta, u, a, b, c = need_shapes(
        {"delta": delta, "u": u, "a": a, "b": b, "c": c},
        {"delta": "C T", "u": "C T", "a": "C S", "b": "S T", "c": "S T"},
    )
    out = np.zeros_like(delta)
    for s in range(a.shape[1]):
        decay = np.exp(delta * a[:, s : s + 1])
        drive = delta * u * b[s]
        x = np.zeros(delta.shape[0])
        for t in range(delta.shape[1]):
            x = decay[:, t] * x + drive[:, t]
            out[:, t] += x * c[s, t]
    return out


def _state_step(d, uu, a_col, B, C, s, t0, width, acc, initial=0.0, du=None):
    """One state over one time chunk of one channel tile; returns the scan tile (its last
    column carries into the next chunk). ``du`` is delta x u when computed once already."""
    dt = d.dtype
    delta_a = nl.ndarray((P, width), dtype=dt, buffer=nl.sbuf)
    nisa.activation(dst=delta_a, op=nl.exp, data=d, scale=a_col)
    b_row = nl.ndarray((1, width), dtype=dt, buffer=nl.sbuf)
    nisa.dma_copy(dst=b_row, src=B[s : s + 1, t0 : t0 + width])
    if du is None:
        du = nl.ndarray((P, width), dtype=dt, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=du, data1=d, data2=uu, op=nl.multiply)
    b_bcast = nl.broadcast_to(b_row, (P, width))
    delta_bu = nl.ndarray((P, width), dtype=dt, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=delta_bu, data1=du, data2=b_bcast, op=nl.multiply)
    scan = nl.ndarray((P, width), dtype=dt, buffer=nl.sbuf)
    nisa.tensor_tensor_scan(
        dst=scan, data0=delta_a, data1=delta_bu, initial=initial, op0=nl.multiply, op1=nl.add
    )
    c_row = nl.ndarray((1, width), dtype=dt, buffer=nl.sbuf)
    nisa.dma_copy(dst=c_row, src=C[s : s + 1, t0 : t0 + width])
    c_bcast = nl.broadcast_to(c_row, (P, width))
    scan_c = nl.ndarray((P, width), dtype=dt, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=scan_c, data1=scan, data2=c_bcast, op=nl.multiply)
    nisa.tensor_tensor(dst=acc, data1=acc, data2=scan_c, op=nl.add)
    return scan


@nki.jit
def nki_selective_scan(delta, u, A, B, C, version="v3", chunk=512, hoist=False):
    """Mamba's selective scan: ``delta, u [channels, T]``, ``A [channels, S]``, ``B, C [S, T]``
    (channels a multiple of 128); returns ``[channels, T]`` (see the module docstring)."""
    channels, T = delta.shape
    S = A.shape[1]
    if version not in VERSIONS:
        raise ValueError(f"unknown version {version!r}; choose one of {', '.join(VERSIONS)}")
    if channels % P:
        raise ValueError(f"channels ({channels}) must be a multiple of {P}: they go on partitions")
    dt = delta.dtype
    out = nl.ndarray((channels, T), dtype=dt, buffer=nl.shared_hbm)
    n_tiles = channels // P
    if version == "v1":
        acc = nl.ndarray((P, n_tiles * T), dtype=dt, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.0)
        for s in nl.affine_range(S):
            for i in nl.affine_range(n_tiles):
                rows = slice(i * P, (i + 1) * P)
                delta_i = nl.ndarray((P, T), dtype=dt, buffer=nl.sbuf)
                nisa.dma_copy(dst=delta_i, src=delta[rows, :])
                a_col = nl.ndarray((P, 1), dtype=dt, buffer=nl.sbuf)
                nisa.dma_copy(dst=a_col, src=A[rows, s : s + 1])
                u_i = nl.ndarray((P, T), dtype=dt, buffer=nl.sbuf)
                nisa.dma_copy(dst=u_i, src=u[rows, :])
                _state_step(delta_i, u_i, a_col, B, C, s, 0, T, acc[:, i * T : (i + 1) * T])
        for i in nl.affine_range(n_tiles):
            nisa.dma_copy(dst=out[i * P : (i + 1) * P, :], src=acc[:, i * T : (i + 1) * T])
        return out
    width = min(chunk, T) if version == "v3" else T
    for i in nl.affine_range(n_tiles):
        rows = slice(i * P, (i + 1) * P)
        acc = nl.ndarray((P, T), dtype=dt, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.0)
        delta_i = nl.ndarray((P, T), dtype=dt, buffer=nl.sbuf)
        nisa.dma_copy(dst=delta_i, src=delta[rows, :])
        u_i = nl.ndarray((P, T), dtype=dt, buffer=nl.sbuf)
        nisa.dma_copy(dst=u_i, src=u[rows, :])
        du = None
        if hoist:  # delta x u does not depend on the state: once per channel tile
            du = nl.ndarray((P, T), dtype=dt, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=du, data1=delta_i, data2=u_i, op=nl.multiply)
        for s in nl.affine_range(S):
            a_col = nl.ndarray((P, 1), dtype=dt, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_col, src=A[rows, s : s + 1])
            if version == "v2":
                _state_step(delta_i, u_i, a_col, B, C, s, 0, T, acc, du=du)
                continue
            carry = nl.ndarray((P, 1), dtype=dt, buffer=nl.sbuf)
            nisa.memset(dst=carry, value=0.0)
            for t0 in nl.sequential_range(0, T, width):
                w = min(width, T - t0)  # the last chunk may be shorter
                sl = slice(t0, t0 + w)
                scan = _state_step(
                    delta_i[:, sl],
                    u_i[:, sl],
                    a_col,
                    B,
                    C,
                    s,
                    t0,
                    w,
                    acc[:, sl],
                    carry,
                    du=None if du is None else du[:, sl],
                )
                nisa.tensor_copy(dst=carry, src=scan[:, w - 1 : w])
        nisa.dma_copy(dst=out[rows, :], src=acc)
    return out
