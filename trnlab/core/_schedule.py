"""Costs of instructions and the engine scheduler (a numba loop over the flat table).

Each compute instruction has two times: how long it occupies its engine (its *issue
interval*: the next instruction on that engine can start after it) and how long until its
result is in SBUF or PSUM (its *latency*: an instruction that depends on it waits for that).
Independent instructions issue back to back; dependent ones pay the pipeline latency. Every rule
below reads its figures from the catalogue (``trnlab/catalog/data/neuroncore.toml`` says where
each comes from):

- Tensor Engine matmul (MultiplyMoving): ``max(N, min(64, M)) / rate`` cycles at the tensor
  clock (ISA cost formula; ``rate`` is the input type's rate relative to bf16: fp32 0.25, fp8 2 on
  NeuronCore-v3, MX 4 on v4). A new stationary tile is loaded (LoadStationary, ``M /
  fast_weight_load`` cycles) in the background while the previous matmul streams; only what
  cannot hide is charged. The result reaches PSUM ``tensor_latency_cycles`` later; matmuls
  accumulating into the same PSUM bank pipeline without waiting for it. A transpose costs
  ``max(P, min(64, F))`` cycles (fp32 at its rate; NeuronCore-v3's transpose mode doubles it).
- Vector: ``max(vector_min_cycles, work + vector_static_cycles)`` to issue (the documented
  ~100-cycle static overhead), ``work + vector_latency_cycles`` to the result, with work from the ISA cost formulas (tensor_tensor 2N, N with one PSUM input or
  all-16-bit SBUF operands; N for one-input ops) and NeuronCore-v3/v4's performance modes
  for 16-bit data (tensor_copy / tensor_scalar 4x in SBUF, 2x through PSUM; tensor_tensor 2x).
- Scalar: ``max(scalar_min_cycles, N / per_cycle + scalar_static_cycles)`` to issue (``per_cycle`` = 2 for 16-bit
  data on NeuronCore-v4), plus ``scalar_latency_cycles`` to the result; an activation whose
  function differs from the engine's last one first loads its table (``act_table_load``).
- GpSimd: ``gpsimd_start_cycles + inputs x 128 x N x bits / (cores x core bits)``.
- DMA: a queue sets up one transfer at a time (``dma_queue_interval``; the set-up of the next
  overlaps the data of the previous); with the hardware DGE (NeuronCore-v3+) the Sync engine's
  DGE instance makes each DMA's descriptors instead (``dge_instruction_time``, one DMA at a
  time); with software DGE GpSimd spends ``swdge_gpsimd_time`` first. Then each DMA engine
  moves the rows of the partitions it
  serves (``dma_partitions_per_engine``) at its streaming rate (``dma_bandwidth / dma_engines``)
  or, if longer, at ``dma_packet_time`` for each contiguous run beyond one per row (a strided
  access);
  engines are shared by all queues and move one transfer at a time. A queue of static
  descriptors streams its transfers one after another at no more than
  ``dma_static_queue_bandwidth`` (on NeuronCore-v2 well below its engines' rate). The consumer
  sees the data ``dma_completion_latency`` after the last byte. A queue completes in order.
- A dependency between two different compute engines costs ``engine_sync_latency`` (semaphore).
- NeuronCore-v2 rules: Vector and GpSimd never access SBUF at the same time, Vector and Scalar
  never access PSUM at the same time.

The scheduler is a list scheduler standing in for the NKI compiler's: it repeatedly starts, of
all the instructions whose dependencies are done, the one that can start earliest. The Vector,
Scalar and GpSimd engines may take any of their next ``compiler_schedule_window`` instructions
in program order (the compiler interleaves independent iterations; 1 = strict program order);
the Tensor Engine (its stationary reloads follow program order) and each DMA queue only their
next. A latency is never below the busy time of any engine,
nor below the core's DMA bytes over its bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trnlab._checks import short

from . import _program as P
from ._errors import KernelArgumentError
from ._params import CoreParams

__all__ = ["Costs", "costs", "schedule"]


@dataclass(frozen=True)
class Costs:
    """Per-instruction costs (seconds) that the scheduler charges.

    Attributes
    ----------
    busy : numpy.ndarray
        Compute instructions: time on the engine (issue interval). DMA: 0.
    done : numpy.ndarray
        Compute instructions: time from start to the result being readable.
    load_stationary : numpy.ndarray
        Matmuls that (re)load their stationary tile: LoadStationary time, else 0.
    row_time : numpy.ndarray
        DMA: time for one DMA engine to move one partition's row of the transfer.
    p0, p1 : numpy.ndarray
        DMA: the SBUF partitions of the transfer (which engines it keeps busy).
    psum : numpy.ndarray
        Instruction reads PSUM (Vector / Scalar; the NeuronCore-v2 PSUM port rule).
    dge : numpy.ndarray
        DMA descriptor generation: 0 prepared in HBM, 1 hardware DGE, 2 GpSimd (software).
    queue_time : numpy.ndarray or None
        DMA with static descriptors: the transfer's bytes over ``dma_static_queue_bandwidth``
        (the most such a queue streams), else 0 (None: no queue limit).
    """

    busy: np.ndarray
    done: np.ndarray
    load_stationary: np.ndarray
    row_time: np.ndarray
    p0: np.ndarray
    p1: np.ndarray
    psum: np.ndarray
    dge: np.ndarray
    queue_time: np.ndarray | None = None


def check_program(program, params) -> None:
    """``program`` a recorded Program and ``params`` a CoreParams, or a teaching error."""
    if not isinstance(program, P.Program):
        raise KernelArgumentError(
            f"program must be a recorded trnlab.core.Program (run.program, or ctx.program() "
            f"after core.record), not {short(program)}"
        )
    _check_params(params)


def _check_params(params) -> None:
    if not isinstance(params, CoreParams):
        raise KernelArgumentError(
            f"params must be a CoreParams (core.core_params('trn2')), not {short(params)}"
        )


def _out_bits(table: np.ndarray, tile_bits: np.ndarray | None) -> np.ndarray:
    out = table["out"]
    if tile_bits is None or not len(tile_bits):
        return table["bits"].astype(np.float64)
    return np.where(out >= 0, tile_bits[np.maximum(out, 0)], 32.0)


def costs(table: np.ndarray, params: CoreParams, tile_bits: np.ndarray | None = None) -> Costs:
    """The cost of every instruction of ``table`` on one NeuronCore (vectorised).

    ``tile_bits`` (bits per element of each tile, by id) lets the 16-bit performance modes see
    the output's format; without it the input's is used.
    """
    _check_params(params)
    if not isinstance(table, np.ndarray) or table.dtype != P.INSTRUCTION_DTYPE:
        raise KernelArgumentError(
            f"table must be a recorded instruction table (program.table), not {short(table)}"
        )
    if tile_bits is not None and (
        not isinstance(tile_bits, np.ndarray) or tile_bits.dtype.kind not in "fiu"
    ):
        raise KernelArgumentError(
            f"tile_bits is an array of bits per element by tile id (or None), not {short(tile_bits)}"
        )
    if tile_bits is not None and len(table) and len(tile_bits) <= int(table["out"].max()):
        raise KernelArgumentError(
            f"tile_bits has {len(tile_bits)} entries but the table writes tile "
            f"{int(table['out'].max())}; give one entry per tile (tile_bits(program))"
        )
    p = params
    n = len(table)
    op = table["op"]
    eng = table["engine"]
    free = table["free"].astype(np.float64)
    n_in = table["n_inputs"].astype(np.float64)
    bits = table["bits"].astype(np.float64)
    flags = table["flags"]
    psum_in = (flags & P.FLAG_PSUM_IN) != 0
    busy = np.zeros(n)
    done = np.zeros(n)
    ls = np.zeros(n)
    row_time = np.zeros(n)
    sixteen = (bits <= 16) & (_out_bits(table, tile_bits) <= 16)
    gen_modes = p.vector_lanes // p.sbuf_partitions  # 4 on NeuronCore-v3/v4 (512 lanes), 1 on v2

    # Tensor Engine ---------------------------------------------------------------------------
    mm = op == P.MATMUL
    if mm.any():
        rate = table["rate"][mm].astype(np.float64)
        cyc = np.maximum(free[mm], np.minimum(p.matmul_min_cycles, table["m"][mm])) / rate
        busy[mm] = cyc / p.tensor_clock
        done[mm] = (cyc + p.tensor_latency_cycles) / p.tensor_clock
        lsc = np.ceil(table["m"][mm] / p.fast_weight_load) * np.maximum(1.0, 1.0 / rate)
        ls[mm] = table["reload"][mm] * lsc / p.tensor_clock
    tr = op == P.TRANSPOSE
    if tr.any():
        rate = table["rate"][tr].astype(np.float64)
        if gen_modes > 1:  # NeuronCore-v3 transpose mode: fp32 transposes twice as fast
            rate = np.where(rate < 1, rate * 2, rate)
        cyc = np.maximum(table["partitions"][tr], np.minimum(64, table["m"][tr])) / rate
        busy[tr] = cyc / p.tensor_clock
        done[tr] = (cyc + p.tensor_latency_cycles) / p.tensor_clock

    # Vector ----------------------------------------------------------------------------------
    vec = eng == P.VECTOR
    if vec.any():
        o = op[vec]
        N = free[vec]
        s16 = sixteen[vec]
        ps = psum_in[vec]
        tt = o == P.TENSOR_TENSOR
        # ISA cost formulas (NeuronCore-v2): tensor_tensor 2N, or N with one PSUM input or all
        # 16-bit SBUF operands; tensor_tensor_scan 2N; one-input ops N.
        work = np.where(tt, np.where(ps | s16, N, 2 * N), np.where(o == P.TENSOR_SCAN, 2 * N, N))
        if gen_modes > 1:  # v3/v4 performance modes for 16-bit data (arch guide)
            copyish = (o == P.TENSOR_SCALAR) | (o == P.COPY)
            speed = np.where(copyish & s16, np.where(ps, gen_modes / 2, gen_modes), 1.0) * np.where(
                tt & s16 & ~ps, gen_modes / 2, 1.0
            )
            work = work / speed
        busy[vec] = np.maximum(p.vector_min_cycles, work + p.vector_static_cycles) / p.vector_clock
        done[vec] = np.maximum(busy[vec], (work + p.vector_latency_cycles) / p.vector_clock)

    # Scalar ----------------------------------------------------------------------------------
    sca = eng == P.SCALAR
    if sca.any():
        per_cycle = np.where(sixteen[sca], p.scalar_lanes / p.sbuf_partitions, 1.0)
        work = free[sca] / per_cycle
        busy[sca] = np.maximum(p.scalar_min_cycles, work + p.scalar_static_cycles) / p.scalar_clock
        done[sca] = np.maximum(busy[sca], (work + p.scalar_latency_cycles) / p.scalar_clock)
        # A function other than the last one the engine used loads its table first.
        act = np.flatnonzero(sca & (op == P.ACTIVATION))
        func = table["dtype"][act].astype(np.int64)
        seq = act[func > 0]  # identity (index 0) needs no table
        f = func[func > 0]
        load = seq[f != np.concatenate([[-1], f[:-1]])]
        busy[load] += p.act_table_load
        done[load] += p.act_table_load

    # GpSimd ----------------------------------------------------------------------------------
    gps = eng == P.GPSIMD
    if gps.any():
        width = p.gpsimd_cores * p.gpsimd_core_bits
        work = np.ceil(np.maximum(n_in[gps], 1) * p.sbuf_partitions * free[gps] * bits[gps] / width)
        busy[gps] = (p.gpsimd_start_cycles + work) / p.gpsimd_clock
        done[gps] = busy[gps]

    # DMA -------------------------------------------------------------------------------------
    dma = np.isin(op, P.DMA_OPS)
    p0 = np.zeros(n, np.int64)
    p1 = np.zeros(n, np.int64)
    dge = np.where(
        (flags & P.FLAG_DGE_HW) != 0, 1, np.where((flags & P.FLAG_DGE_SW) != 0, 2, 0)
    ).astype(np.int64)
    queue_time = np.zeros(n)
    if dma.any():
        # Bytes per partition row: the elements a DMA moves (a strided access's, not its box's).
        parts = np.maximum(table["partitions"][dma].astype(np.float64), 1.0)
        row_bytes = np.ceil(table["bytes"][dma] / parts)
        # A strided access moves more contiguous runs (packets) than one per partition row:
        # its engine handles the further packets at dma_packet_time each (an assumption; see
        # the catalogue), overlapped with the streaming, so a row takes the longer of the two
        # (the DMA bandwidth guide: the packet rate limits small payloads, >= 4 KiB runs
        # stream at full rate).
        extra = np.maximum(table["packets"][dma] - parts, 0.0) / parts
        row_time[dma] = np.maximum(row_bytes / p.dma_engine_bandwidth, extra * p.dma_packet_time)
        # The SBUF side's partitions (a store's source, else the destination: a load's, and an
        # SBUF-to-SBUF copy's, an assumption: no source says how its engines are chosen). An
        # HBM-to-HBM copy spreads its rows from partition 0, as a load of them would (also an
        # assumption).
        reg = np.where(
            (op[dma] == P.DMA_STORE)[:, None], table["in0_region"][dma], table["out_region"][dma]
        )
        hh = op[dma] == P.DMA_HBM
        reg[hh, 0] = 0
        reg[hh, 1] = table["partitions"][dma][hh]
        # A DMA transpose: every engine cooperates, at a share of its rate (an HBM source's or
        # an SBUF source's, the Trainium2 guide), writing an SBUF destination in blocks of
        # [128 partitions, granule elements] (a partial block costs a whole one: assumption).
        tr = (flags[dma] & P.FLAG_TRANSPOSE) != 0
        if tr.any():
            o = op[dma][tr]
            pmax = int(p.sbuf_partitions)
            g = int(p.dma_transpose_granule)
            to_sbuf = (o == P.DMA_LOAD) | (o == P.DMA_SBUF)
            blocks = np.ceil(table["free"][dma][tr] / g) * g * table["bits"][dma][tr] / 8
            per_row = np.where(to_sbuf, blocks, np.ceil(table["bytes"][dma][tr] / pmax))
            from_hbm = (o == P.DMA_LOAD) | (o == P.DMA_HBM)
            share = np.where(from_hbm, p.dma_transpose_hbm_share, p.dma_transpose_sbuf_share)
            row_bytes[tr] = per_row / share
            row_time[np.flatnonzero(dma)[tr]] = row_bytes[tr] / p.dma_engine_bandwidth
            reg[tr, 0] = 0
            reg[tr, 1] = pmax
        p0[dma] = reg[:, 0]
        p1[dma] = reg[:, 1]
        static = dge[dma] == 0
        queue_time[dma] = np.where(
            static, row_bytes * (p1[dma] - p0[dma]) / p.dma_static_queue_bandwidth, 0.0
        )
    return Costs(busy, done, ls, row_time, p0, p1, psum_in & (vec | sca), dge, queue_time)


def _wait_py(e, ec, issue_end, end, sync):
    """When an instruction on engine ``e`` that issues until ``issue_end`` and ends at ``end``
    lets a consumer on engine ``ec`` start."""
    if ec == e and e == 0:  # PSUM accumulation and the TE pipeline: issue order
        return issue_end
    if e < 4 and ec < 4 and ec != e:
        return end + sync
    return end


_wait = _wait_py  # replaced by its compiled form before the scheduler compiles


def _schedule_py(
    engine,
    busy,
    done,
    ls,
    row_time,
    p0,
    p1,
    psum,
    dge,
    queue_time,
    dep_ptr,
    dep_idx,
    dep_strict,
    join_ptr,
    join_idx,
    n_engines,
    n_dma,
    per_engine,
    queue_interval,
    dge_time,
    swdge_time,
    completion,
    sync,
    share_sbuf,
    share_psum,
    window,
    start,
    issue_end,
    end,
):
    """Schedule in place; returns the number of scheduled instructions.

    Engines 0..3 are Tensor, Vector, Scalar, GpSimd; 4.. are DMA queues. ``n_dma`` DMA engines
    serve ``per_engine`` partitions each. ``dge``: 0 static descriptors (the queue sets up each
    transfer), 1 hardware DGE (one DGE instance, ``dge_time`` per DMA), 2 software DGE (GpSimd
    spends ``swdge_time``, then the queue sets up).
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
    free_at = np.zeros(n_engines)  # compute engines: busy until; queues: set-up unit free at
    queue_done = np.zeros(n_engines)  # DMA queues: completion of the last transfer (in order)
    stream_free = np.zeros(n_engines)  # static-descriptor queues: their stream is free at
    dma_free = np.zeros(n_dma)
    active = np.empty(n_engines, np.int64)
    n_active = 0
    for e in range(n_engines):
        if count[e] > 0:
            active[n_active] = e
            n_active += 1
    # Successors (CSR) over the instructions and the joins (node n + j), and per node the
    # dependencies still to schedule and the time its inputs are ready (updated as each
    # dependency is scheduled: every dependency is visited once).
    n_join = join_ptr.shape[0] - 1
    n_nodes = n + n_join
    n_wait = np.zeros(n_nodes, np.int64)
    succ_count = np.zeros(n_nodes + 1, np.int64)
    for i in range(n):
        n_wait[i] = dep_ptr[i + 1] - dep_ptr[i]
        for j in range(dep_ptr[i], dep_ptr[i + 1]):
            succ_count[dep_idx[j] + 1] += 1
    for g in range(n_join):
        n_wait[n + g] = join_ptr[g + 1] - join_ptr[g]
        for j in range(join_ptr[g], join_ptr[g + 1]):
            succ_count[join_idx[j] + 1] += 1
    succ_ptr = np.cumsum(succ_count)
    succ_idx = np.empty(succ_ptr[n_nodes], np.int64)
    succ_strict = np.zeros(succ_ptr[n_nodes], np.bool_)  # a wait the kernel asked for
    sfill = succ_ptr[:-1].copy()
    for i in range(n):
        for j in range(dep_ptr[i], dep_ptr[i + 1]):
            d = dep_idx[j]
            succ_idx[sfill[d]] = i
            succ_strict[sfill[d]] = dep_strict[j]
            sfill[d] += 1
    for g in range(n_join):
        for j in range(join_ptr[g], join_ptr[g + 1]):
            d = join_idx[j]
            succ_idx[sfill[d]] = n + g
            sfill[d] += 1
    r_dep = np.zeros(n)  # inputs ready (all dependencies)
    r_ext = np.zeros(n)  # ... from other engines (what a background LoadStationary waits for)
    # A join's readiness for a consumer on each engine (the wait depends on both engines)
    j_dep = np.zeros((n_join, n_engines))
    j_ext = np.zeros((n_join, n_engines))
    ready = np.empty(n_join, np.int64)  # joins whose members have all been scheduled
    dge_free = 0.0  # the hardware DGE instance commanded by the Sync engine
    ls_free = 0.0  # LoadStationary unit of the Tensor Engine
    last_mm_start = 0.0
    vg_free = 0.0  # NeuronCore-v2: the SBUF port Vector and GpSimd share
    psum_free = 0.0  # NeuronCore-v2: the PSUM port Vector and Scalar share
    # Per engine, the positions (in `order`) not yet started form a linked list, so a scan of
    # an engine's next `window` candidates never walks over started ones (out-of-order starts
    # would otherwise leave them in its way: quadratic).
    head = ptr[:-1].copy()  # per engine: first position not yet started
    nxt = np.arange(1, n + 1)  # the next position not yet started (ptr[e + 1]: none)
    prv = np.arange(-1, n - 1)  # the previous one (below ptr[e]: none)
    pos = np.empty(n, np.int64)  # position of each instruction in `order`
    for q in range(n):
        pos[order[q]] = q
    scheduled = 0
    while scheduled < n:
        best = -1
        best_t = np.inf
        best_e = -1
        for a in range(n_active):
            e = active[a]
            # Vector, Scalar and GpSimd may start any of their next `window` unstarted
            # instructions (the compiler's scheduling); the Tensor Engine (whose stationary
            # reloads follow program order) and DMA queues only their next one
            limit = window if 0 < e < 4 else 1
            seen = 0
            q = head[e]
            while q < ptr[e + 1] and seen < limit:
                i = order[q]
                q = nxt[q]
                seen += 1
                if n_wait[i] > 0:
                    continue
                t = free_at[e]
                if r_dep[i] > t:
                    t = r_dep[i]
                if e < 4:
                    if share_sbuf and (e == 1 or e == 3) and vg_free > t:
                        t = vg_free
                    if share_psum and psum[i] and psum_free > t:
                        t = psum_free
                    if e == 0 and ls[i] > 0.0:  # background LoadStationary, after its data
                        ls_start = r_ext[i]
                        if ls_start < ls_free:
                            ls_start = ls_free
                        if ls_start < last_mm_start:
                            ls_start = last_mm_start
                        if ls_start + ls[i] > t:
                            t = ls_start + ls[i]
                elif dge[i] == 1:
                    if dge_free > t:
                        t = dge_free
                elif dge[i] == 2:
                    if free_at[3] > t:
                        t = free_at[3]
                if t < best_t or (t == best_t and i < best):
                    best_t = t
                    best = i
                    best_e = e
        if best < 0:  # cannot happen: dependencies point backwards in program order
            return scheduled
        i = best
        e = best_e
        s = best_t
        start[i] = s
        if e < 4:
            f = s + busy[i]
            issue_end[i] = f
            end[i] = s + done[i]
            free_at[e] = f
            if e == 0:
                if ls[i] > 0.0:
                    ls_free = s  # the load ended by the time the matmul started
                last_mm_start = s
            if share_sbuf and (e == 1 or e == 3):
                vg_free = f
            if share_psum and psum[i]:
                psum_free = f
        else:  # DMA: descriptors (set-up), then the rows on the engines of its partitions
            if dge[i] == 1:  # hardware DGE: the instance makes the descriptors
                setup_end = s + dge_time
                dge_free = setup_end
                free_at[e] = s
            elif dge[i] == 2:  # software DGE: GpSimd writes them, then the queue sets up
                g = s + swdge_time
                free_at[3] = g
                if free_at[e] > g:
                    g = free_at[e]
                setup_end = g + queue_interval
                free_at[e] = setup_end
            else:
                setup_end = s + queue_interval
                free_at[e] = setup_end
            data_end = setup_end
            e0 = p0[i] // per_engine
            e1 = (p1[i] - 1) // per_engine
            for k in range(e0, e1 + 1):
                lo = k * per_engine
                hi = lo + per_engine
                if lo < p0[i]:
                    lo = p0[i]
                if hi > p1[i]:
                    hi = p1[i]
                b = setup_end
                if dma_free[k % n_dma] > b:
                    b = dma_free[k % n_dma]
                b += (hi - lo) * row_time[i]
                dma_free[k % n_dma] = b
                if b > data_end:
                    data_end = b
            # A static queue streams its transfers one after another at no more than its own
            # rate. The engines' share of the bytes is charged from the set-up's end (DMA
            # engines serve up to 16 rings round-robin, switching at packet boundaries, so a
            # slow ring leaves them to the others: one busy block per engine approximates it).
            if queue_time[i] > 0.0:
                q_end = setup_end
                if stream_free[e] > q_end:
                    q_end = stream_free[e]
                q_end += queue_time[i]
                stream_free[e] = q_end
                if q_end > data_end:
                    data_end = q_end
            issue_end[i] = data_end
            f = data_end + completion
            if queue_done[e] > f:
                f = queue_done[e]
            queue_done[e] = f
            end[i] = f
        q = pos[i]  # unlink: started
        a = prv[q]
        b = nxt[q]
        if a >= ptr[e]:
            nxt[a] = b
        else:
            head[e] = b
        if b < ptr[e + 1]:
            prv[b] = a
        n_ready = 0
        for j in range(succ_ptr[i], succ_ptr[i + 1]):
            c = succ_idx[j]
            if c < n:
                ec = engine[c]
                # a semaphore the kernel asked for fires at the producer's end, whatever the
                # engines (the Tensor Engine's issue-order rule is for memory order)
                r = _wait(e, ec, end[i] if succ_strict[j] else issue_end[i], end[i], sync)
                if r > r_dep[c]:
                    r_dep[c] = r
                if ec != e and r > r_ext[c]:
                    r_ext[c] = r
            else:  # a join: what it passes on, for a consumer on each engine
                g = c - n
                for ec in range(n_engines):
                    r = _wait(e, ec, issue_end[i], end[i], sync)
                    if r > j_dep[g, ec]:
                        j_dep[g, ec] = r
                    if ec != e and r > j_ext[g, ec]:
                        j_ext[g, ec] = r
                if n_wait[c] == 1:
                    ready[n_ready] = g
                    n_ready += 1
            n_wait[c] -= 1
        while n_ready > 0:  # joins complete as their last member is scheduled
            n_ready -= 1
            g = ready[n_ready]
            for j in range(succ_ptr[n + g], succ_ptr[n + g + 1]):
                c = succ_idx[j]
                if c < n:
                    ec = engine[c]
                    if j_dep[g, ec] > r_dep[c]:
                        r_dep[c] = j_dep[g, ec]
                    if j_ext[g, ec] > r_ext[c]:
                        r_ext[c] = j_ext[g, ec]
                else:
                    h = c - n
                    for ec in range(n_engines):
                        if j_dep[g, ec] > j_dep[h, ec]:
                            j_dep[h, ec] = j_dep[g, ec]
                        if j_ext[g, ec] > j_ext[h, ec]:
                            j_ext[h, ec] = j_ext[g, ec]
                    if n_wait[c] == 1:
                        ready[n_ready] = h
                        n_ready += 1
                n_wait[c] -= 1
        scheduled += 1
    return scheduled


_compiled = None


def _kernel():
    global _compiled, _wait
    if _compiled is None:
        from numba import njit

        _wait = njit(cache=True, inline="always")(_wait_py)
        _compiled = njit(cache=True)(_schedule_py)
    return _compiled


def schedule(
    program: P.Program, params: CoreParams, c: Costs | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start, issue-end and end time (s) of every instruction of ``program`` on one NeuronCore.

    ``start``: the instruction begins on its engine (a DMA: its set-up on the queue);
    ``issue_end``: its engine is free again (a DMA: its last byte moved); ``end``: its result
    can be read (a DMA: the consumer has been signalled).
    """
    check_program(program, params)
    if c is not None and not isinstance(c, Costs):
        raise KernelArgumentError(
            f"c is the program's Costs (core.costs(...)) or None, not {short(c)}"
        )
    n = len(program)
    start = np.zeros(n)
    issue_end = np.zeros(n)
    end = np.zeros(n)
    if n == 0:
        return start, issue_end, end
    if c is None:
        c = costs(program.table, params, tile_bits(program))
    got = _kernel()(
        program.table["engine"].astype(np.int64),
        c.busy,
        c.done,
        c.load_stationary,
        c.row_time,
        c.p0,
        c.p1,
        c.psum,
        c.dge,
        np.zeros(n) if c.queue_time is None else c.queue_time,
        program.dep_ptr,
        program.dep_idx.astype(np.int64),
        (
            np.zeros(len(program.dep_idx), np.bool_)
            if program.dep_strict is None
            else program.dep_strict
        ),
        program.join_ptr,
        program.join_idx.astype(np.int64),
        program.n_engines,
        int(params.dma_engines),
        int(params.dma_partitions_per_engine),
        float(params.dma_queue_interval),
        float(params.dge_instruction_time),
        float(params.swdge_gpsimd_time),
        float(params.dma_completion_latency),
        float(params.engine_sync_latency),
        bool(params.vector_gpsimd_share_sbuf),
        bool(params.vector_scalar_share_psum),
        int(params.compiler_schedule_window),
        start,
        issue_end,
        end,
    )
    if got != n:  # pragma: no cover - guarded by construction
        raise RuntimeError(f"scheduler stalled after {got} of {n} instructions")
    return start, issue_end, end


def tile_bits(program: P.Program) -> np.ndarray:
    """Bits per element of every tile of ``program``, by tile id."""
    from ._tiles import format_bits

    return np.array([format_bits(t.fmt) for t in program.tiles], np.float64)
