"""Dependencies between instructions, on physical memory, in one linear numba pass.

Every operand is a rectangle of physical memory: SBUF and PSUM as ``[partition, byte offset]``
(a tile takes the same byte range in each of its partitions), an HBM tensor as ``[row, col]``.
An instruction that reads a rectangle waits for the earlier writes overlapping it (read after
write); one that writes waits for the earlier writes and reads of it (write after write, write
after read: buffer reuse, including a new tile placed on the bytes of a freed one). DMA queues
complete in order, so only the latest dependency on each queue is kept; compute engines may run
independent instructions out of program order (the compiler's scheduling), so every dependency
on them is kept.

The pass keeps, per memory object, a grid of cells with the recent accesses that touch each
cell; a write that covers an older access retires it, and a read that covers an older read of
the same engine replaces it. A kernel's cost is then linear in its instructions (the old
per-tile lists grew with every store to a new region of a tensor: quadratic).
"""

from __future__ import annotations

import numpy as np

from . import _program as P

__all__ = ["dependencies"]

SBUF, PSUM = 0, 1
_SBUF_CELL_BYTES = 1024
_ROW_CELL = 32  # partitions per cell (a quadrant)
_HBM_MAX_CELLS = 1 << 20


def _grow_py(a, n):
    b = np.empty(n, a.dtype)
    b[: a.shape[0]] = a
    return b


_grow = _grow_py  # replaced by its compiled form before the pass compiles


def _deps_py(
    op,
    engine,
    flags,
    ids,  # (n, 6 + x): out, in0, in1, hbm, in2, hbm source, then x further tiles read (-1: none)
    regions,  # (n, 6 + x, 4): region of each operand
    tile_space,
    tile_offset,
    tile_bits,
    obj_rows,
    obj_cols,
    obj_rb,
    obj_cb,
    obj_ncol,
    obj_base,
    obj_track_reads,
    n_cells,
    n_engines,
    psum_bank_bytes,
):
    n = op.shape[0]
    head = np.full(n_cells, -1, np.int64)
    cap = max(1024, 4 * n)
    r0 = np.empty(cap, np.int64)
    r1 = np.empty(cap, np.int64)
    c0 = np.empty(cap, np.int64)
    c1 = np.empty(cap, np.int64)
    rinstr = np.empty(cap, np.int64)
    reng = np.empty(cap, np.int64)
    rwrite = np.empty(cap, np.uint8)
    rnext = np.empty(cap, np.int64)
    nrec = 0
    ptr = np.zeros(n + 1, np.int64)
    dcap = max(1024, 2 * n)
    didx = np.empty(dcap, np.int32)
    nd = 0
    seen = np.full(n, -1, np.int64)
    last = np.full(n_engines, -1, np.int64)
    touched = np.empty(n_engines, np.int64)
    found = np.empty(64, np.int64)
    slots = ids.shape[1]
    acc_obj = np.empty(slots, np.int64)
    acc_rect = np.empty((slots, 4), np.int64)
    acc_write = np.empty(slots, np.uint8)
    for i in range(n):
        e = engine[i]
        # The accesses of instruction i: (object, rectangle, write?).
        na = 0
        for slot in range(slots):
            t = ids[i, slot]
            if t < 0:
                continue
            rg = regions[i, slot]
            if slot != 3 and slot != 5:  # a tile
                sp = tile_space[t]
                b = tile_bits[t]
                if sp == SBUF:
                    lo = tile_offset[t] + int(np.floor(rg[2] * b / 8.0))
                    hi = tile_offset[t] + int(np.ceil(rg[3] * b / 8.0))
                else:
                    lo = tile_offset[t] * psum_bank_bytes + rg[2] * 4
                    hi = tile_offset[t] * psum_bank_bytes + rg[3] * 4
                acc_obj[na] = sp
                acc_rect[na, 0] = rg[0]
                acc_rect[na, 1] = rg[1]
                acc_rect[na, 2] = lo
                acc_rect[na, 3] = hi
                acc_write[na] = 1 if slot == 0 else 0
            else:  # an HBM tensor: stores and HBM -> HBM copies write slot 3, the rest read
                acc_obj[na] = 2 + t
                acc_rect[na, 0] = rg[0]
                acc_rect[na, 1] = rg[1]
                acc_rect[na, 2] = rg[2]
                acc_rect[na, 3] = rg[3]
                acc_write[na] = (
                    1 if slot == 3 and (op[i] == P.DMA_STORE or op[i] == P.DMA_HBM) else 0
                )
            na += 1
        nf = 0
        for a in range(na):
            ob = acc_obj[a]
            wr = acc_write[a]
            if wr == 0 and not obj_track_reads[ob]:
                continue  # never written during the kernel: nothing to wait for, no WAR
            ar0 = acc_rect[a, 0]
            ar1 = acc_rect[a, 1]
            ac0 = acc_rect[a, 2]
            ac1 = acc_rect[a, 3]
            rb = obj_rb[ob]
            cb = obj_cb[ob]
            for cr in range(ar0 // rb, (ar1 - 1) // rb + 1):
                for cc in range(ac0 // cb, (ac1 - 1) // cb + 1):
                    cell = obj_base[ob] + cr * obj_ncol[ob] + cc
                    prev = -1
                    k = head[cell]
                    while k >= 0:
                        nxt = rnext[k]
                        overl = r0[k] < ar1 and ar0 < r1[k] and c0[k] < ac1 and ac0 < c1[k]
                        kill = False
                        if overl and (wr == 1 or rwrite[k] == 1) and rinstr[k] != i:
                            d = rinstr[k]
                            if seen[d] != i:
                                seen[d] = i
                                if nf == found.shape[0]:
                                    found = _grow(found, 2 * nf)
                                found[nf] = d
                                nf += 1
                        contained = ar0 <= r0[k] and r1[k] <= ar1 and ac0 <= c0[k] and c1[k] <= ac1
                        if contained and (wr == 1 or (rwrite[k] == 0 and reng[k] == e)):
                            kill = True
                        if kill:
                            if prev < 0:
                                head[cell] = nxt
                            else:
                                rnext[prev] = nxt
                        else:
                            prev = k
                        k = nxt
                    # record this access in the cell
                    if nrec == cap:
                        cap *= 2
                        r0 = _grow(r0, cap)
                        r1 = _grow(r1, cap)
                        c0 = _grow(c0, cap)
                        c1 = _grow(c1, cap)
                        rinstr = _grow(rinstr, cap)
                        reng = _grow(reng, cap)
                        rwrite = _grow(rwrite, cap)
                        rnext = _grow(rnext, cap)
                    r0[nrec] = ar0
                    r1[nrec] = ar1
                    c0[nrec] = ac0
                    c1[nrec] = ac1
                    rinstr[nrec] = i
                    reng[nrec] = e
                    rwrite[nrec] = wr
                    rnext[nrec] = head[cell]
                    head[cell] = nrec
                    nrec += 1
            # A read-modify-write of the output (PSUM accumulation) also reads it: covered by
            # the write's RAW/WAW checks above.
        # DMA queues complete in order: the latest dependency on a queue implies the earlier
        # ones. Compute engines may run their instructions out of program order (the compiler
        # schedules them), so every dependency on them is kept.
        nt = 0
        for j in range(nf):
            d = found[j]
            ed = engine[d]
            if ed < 4:
                if nt == touched.shape[0]:
                    touched = _grow(touched, 2 * nt)
                touched[nt] = d
                nt += 1
            elif last[ed] < 0 or d > last[ed]:
                last[ed] = d
        for j in range(nf):
            d = found[j]
            ed = engine[d]
            if ed >= 4 and last[ed] == d:
                if nt == touched.shape[0]:
                    touched = _grow(touched, 2 * nt)
                touched[nt] = d
                nt += 1
                last[ed] = -1
        if nd + nt > dcap:
            dcap = 2 * (nd + nt)
            didx = _grow(didx, dcap)
        touched[:nt].sort()
        for j in range(nt):
            didx[nd] = touched[j]
            nd += 1
        ptr[i + 1] = nd
    return ptr, didx[:nd].copy()


_compiled = None


def _kernel():
    global _compiled, _grow
    if _compiled is None:
        from numba import njit

        _grow = njit(cache=True)(_grow_py)
        _compiled = njit(cache=True)(_deps_py)
    return _compiled


def _grid(rows: int, cols: int, rb: int, cb: int) -> tuple[int, int, int, int]:
    rb = max(1, rb)
    cb = max(1, cb)
    return rb, cb, -(-rows // rb), -(-cols // cb)


def _hbm_grid(shape, min_rows: int, min_cols: int) -> tuple[int, int, int, int]:
    """Cells of an HBM tensor shaped like its smallest accesses, ``min_rows`` x ``min_cols``
    (a kernel that moves 128 x 512 tiles gets 128 x 512 cells, one that stores single rows gets
    one-row cells; 0: no access, one cell), so an access touches few cells and a cell holds few
    accesses; at most about a million cells."""
    r, c = shape
    rb, cb = (min_rows, min_cols) if min_rows > 0 else (r, c)
    rb, cb = max(1, rb), max(1, cb)
    while -(-r // rb) * -(-c // cb) > _HBM_MAX_CELLS:
        if -(-r // rb) >= -(-c // cb):
            rb *= 2
        else:
            cb *= 2
    return _grid(r, c, rb, cb)


def dependencies(
    table: np.ndarray, tiles, tensors, params, n_engines: int, extra=None, hbm_reads=None
):
    """CSR dependencies (``dep_ptr``, ``dep_idx``) of a recorded instruction table.

    Parameters
    ----------
    table : numpy.ndarray
        The structured instruction table (:data:`trnlab.core._program.INSTRUCTION_DTYPE`).
    tiles : sequence of Tile or TileRecord
        Tiles by id (space, byte offset or PSUM bank, format).
    tensors : sequence of HBMTensor or TensorRecord
    params : CoreParams
    n_engines : int
        Compute engines plus DMA queues.
    extra : dict, optional
        Instruction -> ``((tile id, region), ...)``: further tiles it reads beyond its row's
        operands (an MX matmul's scales).
    hbm_reads : dict, optional
        Instruction -> ``(tensor id, region)``: the HBM source of an HBM -> HBM copy.
    """
    n = len(table)
    if n == 0:
        return np.zeros(1, np.int64), np.zeros(0, np.int32)
    from ._tiles import format_bits

    tile_space = np.array([0 if t.space == "sbuf" else 1 for t in tiles] or [0], np.int64)
    tile_offset = np.array([int(t.offset) for t in tiles] or [0], np.int64)
    tile_bits = np.array([format_bits(t.fmt) for t in tiles] or [32.0], np.float64)
    # Memory objects: SBUF, PSUM, then each HBM tensor, each with a grid of cells.
    sbuf_bytes = int(params.sbuf_usable_partition_bytes) + 4096
    psum_bytes = int(params.psum_partition_bytes)
    grids = [
        _grid(int(params.sbuf_partitions), sbuf_bytes, _ROW_CELL, _SBUF_CELL_BYTES),
        _grid(int(params.sbuf_partitions), psum_bytes, _ROW_CELL, int(params.psum_bank_bytes)),
    ]
    hid = table["hbm"].astype(np.int64)
    hreg = table["hbm_region"].astype(np.int64)
    src_id = np.full(n, -1, np.int32)
    src_reg = np.full((n, 4), -1, np.int32)
    for i, (h, region) in (hbm_reads or {}).items():
        src_id[i] = h
        src_reg[i] = region
    if hbm_reads:
        hid = np.concatenate([hid, src_id[src_id >= 0]])
        hreg = np.concatenate([hreg, src_reg[src_id >= 0]])
    # Each tensor's smallest access, in one pass over the accesses (not one per tensor).
    n_t = len(tensors)
    min_rows = np.zeros(n_t, np.int64)
    min_cols = np.zeros(n_t, np.int64)
    acc = hid >= 0
    if acc.any():
        big = np.iinfo(np.int64).max
        min_rows[:] = big
        min_cols[:] = big
        np.minimum.at(min_rows, hid[acc], hreg[acc, 1] - hreg[acc, 0])
        np.minimum.at(min_cols, hid[acc], hreg[acc, 3] - hreg[acc, 2])
        min_rows[min_rows == big] = 0
        min_cols[min_cols == big] = 0
    for t in tensors:
        grids.append(_hbm_grid(t.shape, int(min_rows[t.id]), int(min_cols[t.id])))
    rb = np.array([g[0] for g in grids], np.int64)
    cb = np.array([g[1] for g in grids], np.int64)
    nrow = np.array([g[2] for g in grids], np.int64)
    ncol = np.array([g[3] for g in grids], np.int64)
    base = np.zeros(len(grids), np.int64)
    np.cumsum((nrow * ncol)[:-1], out=base[1:])
    n_cells = int((nrow * ncol).sum())
    # Reads of an HBM tensor matter only if the kernel also writes it (WAR, RAW).
    track = np.ones(len(grids), np.bool_)
    track[2:] = False
    track[[2 + t for t in P.written_tensors(table)]] = True
    # The table's own widths (int32): a million-instruction kernel's operand regions take
    # 96 MB so, twice that as int64.
    ids = np.stack(
        [table["out"], table["in0"], table["in1"], table["hbm"], table["in2"], src_id], 1
    )
    regions = np.stack(
        [
            table["out_region"],
            table["in0_region"],
            table["in1_region"],
            table["hbm_region"],
            table["in2_region"],
            src_reg,
        ],
        1,
    )
    if extra:
        width = max(len(v) for v in extra.values())
        ids = np.concatenate([ids, np.full((n, width), -1, np.int32)], 1)
        regions = np.concatenate([regions, np.full((n, width, 4), -1, np.int32)], 1)
        for i, reads in extra.items():
            for j, (tid, region) in enumerate(reads):
                ids[i, 6 + j] = tid
                regions[i, 6 + j] = region
    return _kernel()(
        table["op"].astype(np.int64),
        table["engine"].astype(np.int64),
        table["flags"].astype(np.int64),
        ids,
        regions,
        tile_space,
        tile_offset,
        tile_bits,
        nrow * rb,
        ncol * cb,
        rb,
        cb,
        ncol,
        base,
        track,
        n_cells,
        n_engines,
        int(params.psum_bank_bytes),
    )
