"""Costs of instructions and the engine scheduler (a numba loop over the flat table).

Cost rules (each from the catalogue; see ``data/neuroncore.toml`` for sources):

- Tensor Engine matmul: ``max(N, matmul_min_cycles) / rate`` cycles at the tensor clock, where
  ``rate`` is the input type's rate relative to bf16 (fp32 0.25 -> 4x the cycles, fp8 2 on
  NeuronCore-v3, MX 4 on v4), plus ``ceil(K / fast_weight_load)`` cycles when the stationary
  tile is (re)loaded. A transpose is a matmul against an identity, N = partitions.
- Vector: ``vector_fixed_cycles + max(vector_min_cycles, inputs x F x 128 / lanes)`` cycles
  (lanes: ``vector_lanes`` for <= 16-bit data, ``vector_lanes_32bit`` otherwise).
- Scalar: ``sbuf_access_cycles + max(scalar_min_cycles, F x 128 / scalar_lanes)``.
- GpSimd: ``gpsimd_start_cycles + inputs x 128 x F x bits / (gpsimd_cores x gpsimd_core_bits)``.
- DMA: ``dma_setup`` on its queue, then the data moves at
  ``min(dma_bandwidth, ceil(P / dma_partitions_per_engine) x dma_bandwidth / dma_engines) x eff``
  while holding ``bytes / (dma_bandwidth x eff)`` of the core's shared DMA bandwidth;
  ``eff`` is the per-partition efficiency (1 from ``dma_saturating_bytes`` up, the assumed
  fractions at ``dma_efficient_bytes`` and ``dma_overhead_bytes``, linear in log2 of the size
  in between, proportional to size below the overhead threshold).

The scheduler runs every engine (and each DMA queue) in order; across engines it is a list
scheduler: it repeatedly starts, among the engines whose next instruction has its dependencies
done, the one that can start earliest. So a latency is never below the busy time of any
engine, nor below the core's DMA bytes over its bandwidth.
"""

from __future__ import annotations

import numpy as np

from . import _program as P
from ._params import CoreParams

__all__ = ["costs", "dma_efficiency", "schedule"]


def dma_efficiency(bytes_per_partition, params: CoreParams) -> np.ndarray:
    """Fraction of the DMA bandwidth reached by transfers of this many bytes per partition."""
    b = np.asarray(bytes_per_partition, np.float64)
    lo, mid, hi = params.dma_overhead_bytes, params.dma_efficient_bytes, params.dma_saturating_bytes
    e_lo, e_mid = params.dma_efficiency_at_overhead, params.dma_efficiency_at_efficient
    with np.errstate(divide="ignore", invalid="ignore"):
        lb = np.log2(np.maximum(b, 1.0))
        out = np.where(
            b >= hi,
            1.0,
            np.where(
                b >= mid,
                e_mid + (1 - e_mid) * (lb - np.log2(mid)) / (np.log2(hi) - np.log2(mid)),
                np.where(
                    b >= lo,
                    e_lo + (e_mid - e_lo) * (lb - np.log2(lo)) / (np.log2(mid) - np.log2(lo)),
                    e_lo * b / lo,
                ),
            ),
        )
    return np.clip(out, 1e-6, 1.0)


def costs(table: np.ndarray, params: CoreParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Duration, DMA setup and DMA shared-bandwidth time (seconds) of every instruction."""
    p = params
    op = table["op"]
    free = table["free"].astype(np.float64)
    n_in = table["n_inputs"].astype(np.float64)
    bits = table["bits"].astype(np.float64)
    parts_total = float(p.sbuf_partitions)
    dur = np.zeros(len(table))
    setup = np.zeros(len(table))
    pipe = np.zeros(len(table))

    te = (op == P.MATMUL) | (op == P.TRANSPOSE)
    if te.any():
        rate = table["rate"][te].astype(np.float64)
        cyc = np.maximum(free[te], p.matmul_min_cycles) / rate
        cyc += table["reload"][te] * np.ceil(table["k"][te] / p.fast_weight_load)
        dur[te] = cyc / p.tensor_clock

    eng = table["engine"]
    vec = eng == P.VECTOR
    if vec.any():
        lanes = np.where(bits[vec] <= 16, p.vector_lanes, p.vector_lanes_32bit)
        work = np.maximum(n_in[vec], 1) * free[vec] * parts_total / lanes
        dur[vec] = (p.vector_fixed_cycles + np.maximum(p.vector_min_cycles, work)) / p.vector_clock
    sca = eng == P.SCALAR
    if sca.any():
        work = free[sca] * parts_total / p.scalar_lanes
        dur[sca] = (p.sbuf_access_cycles + np.maximum(p.scalar_min_cycles, work)) / p.scalar_clock
    gps = eng == P.GPSIMD
    if gps.any():
        width = p.gpsimd_cores * p.gpsimd_core_bits
        work = np.ceil(np.maximum(n_in[gps], 1) * parts_total * free[gps] * bits[gps] / width)
        dur[gps] = (p.gpsimd_start_cycles + work) / p.gpsimd_clock

    dma = (op == P.DMA_LOAD) | (op == P.DMA_STORE)
    if dma.any():
        nbytes = table["bytes"][dma].astype(np.float64)
        parts = np.maximum(table["partitions"][dma], 1)
        eff = dma_efficiency(nbytes / parts, p)
        engines = np.minimum(p.dma_engines, np.ceil(parts / p.dma_partitions_per_engine))
        own_bw = np.minimum(p.dma_bandwidth, engines * p.dma_engine_bandwidth) * eff
        setup[dma] = p.dma_setup
        pipe[dma] = nbytes / (p.dma_bandwidth * eff)
        dur[dma] = np.maximum(nbytes / own_bw, pipe[dma])
    return dur, setup, pipe


def _schedule_py(engine, dur, setup, pipe, dep_ptr, dep_idx, n_engines, share, start, end):
    """Schedule in place; returns the number of scheduled instructions.

    ``share`` >= 0 makes GpSimd and Vector exclusive (NeuronCore-v2 SBUF port rule).
    """
    n = engine.shape[0]
    count = np.zeros(n_engines, np.int64)
    for i in range(n):
        count[engine[i]] += 1
    ptr = np.zeros(n_engines + 1, np.int64)
    for e in range(n_engines):
        ptr[e + 1] = ptr[e] + count[e]
    order = np.empty(n, np.int64)
    fill = ptr[:-1].copy()
    for i in range(n):
        e = engine[i]
        order[fill[e]] = i
        fill[e] += 1
    pos = ptr[:-1].copy()
    free_at = np.zeros(n_engines)
    done = np.zeros(n, np.bool_)
    active = np.empty(n_engines, np.int64)
    n_active = 0
    for e in range(n_engines):
        if count[e] > 0:
            active[n_active] = e
            n_active += 1
    pipe_free = 0.0
    scheduled = 0
    while scheduled < n:
        best = -1
        best_t = np.inf
        best_e = -1
        for a in range(n_active):
            e = active[a]
            if pos[e] >= ptr[e + 1]:
                continue
            i = order[pos[e]]
            t = free_at[e]
            if share >= 0 and (e == share or e == 1):
                other = 1 if e == share else share
                if free_at[other] > t:
                    t = free_at[other]
            ok = True
            for j in range(dep_ptr[i], dep_ptr[i + 1]):
                d = dep_idx[j]
                if not done[d]:
                    ok = False
                    break
                if end[d] > t:
                    t = end[d]
            if not ok:
                continue
            if t < best_t or (t == best_t and i < best):
                best_t = t
                best = i
                best_e = e
        if best < 0:  # cannot happen: dependencies point backwards in program order
            return scheduled
        i = best
        s = best_t
        if setup[i] > 0.0 or pipe[i] > 0.0:  # DMA: setup on its queue, data through the pipe
            data = s + setup[i]
            if pipe_free > data:
                data = pipe_free
            pipe_free = data + pipe[i]
            f = data + dur[i]
        else:
            f = s + dur[i]
        start[i] = s
        end[i] = f
        done[i] = True
        free_at[best_e] = f
        if share >= 0 and (best_e == share or best_e == 1):
            other = 1 if best_e == share else share
            if free_at[other] < f:
                free_at[other] = f
        pos[best_e] += 1
        scheduled += 1
    return scheduled


_compiled = None


def _kernel():
    global _compiled
    if _compiled is None:
        from numba import njit

        _compiled = njit(cache=True)(_schedule_py)
    return _compiled


def schedule(program: P.Program, params: CoreParams) -> tuple[np.ndarray, np.ndarray]:
    """Start and end time (s) of every instruction of ``program`` on one NeuronCore."""
    n = len(program)
    start = np.zeros(n)
    end = np.zeros(n)
    if n == 0:
        return start, end
    dur, setup, pipe = costs(program.table, params)
    share = P.GPSIMD if params.vector_gpsimd_share_sbuf else -1
    got = _kernel()(
        program.table["engine"].astype(np.int64),
        dur,
        setup,
        pipe,
        program.dep_ptr,
        program.dep_idx.astype(np.int64),
        program.n_engines,
        share,
        start,
        end,
    )
    if got != n:  # pragma: no cover - guarded by construction
        raise RuntimeError(f"scheduler stalled after {got} of {n} instructions")
    return start, end
