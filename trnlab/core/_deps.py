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
cell; a write that covers an older access retires it. A read that covers an older read of the
same engine replaces it only where the engine's instructions end in program order (the Tensor
Engine, DMA queues): Vector, Scalar and GpSimd may start a later read before an earlier one
(the compiler's window, whatever window the program is later scheduled with), so a later write
must wait for both.

Two patterns would still cost P x R: a region written in P pieces (no write covers another)
and read whole R times, each read waiting for every piece; and a region read R times by the
out-of-order engines, then written in P parts, each part waiting for every read. So any read
that finds at least :data:`JOIN_MIN` writes (or :data:`READ_JOIN_MIN` reads) inside its
region merges them into a *join*, a node the scheduler completes when its last member ends (a
member may be an earlier join); their records leave the cells for one join record per cell,
over their bounding box there, and later accesses wait for the join (P + R dependencies). The price: a later access
that overlaps a join's box waits for all its members, even where it touches only one piece (or
a gap between pieces), as a compiler that syncs on whole tiles would make it. A later write
waits for nothing more than it did: it already waited, through the write after read, for the
read that made the join. A kernel's cost is then linear in its instructions and the cells its
accesses touch.
"""

from __future__ import annotations

import numpy as np

from trnlab._checks import whole

from . import _program as P
from ._errors import KernelArgumentError

__all__ = ["dependencies"]

SBUF, PSUM = 0, 1
_SBUF_CELL_BYTES = 1024
_ROW_CELL = 32  # partitions per cell (a quadrant)
_HBM_MAX_CELLS = 1 << 20
_FAR = 1 << 62  # beyond any coordinate
#: distinct writes inside one read that it merges into a join (see above)
JOIN_MIN = 32
#: ... and reads: lower, since reads of Vector, Scalar and GpSimd wait in the cells until a
#: write covers them (a tile read piece by piece keeps up to this many per piece)
READ_JOIN_MIN = 8


def _grow_py(a, n):
    b = np.empty(n, a.dtype)
    b[: a.shape[0]] = a
    return b


def _grow_fill_py(a, n, fill):
    b = np.full(n, fill, a.dtype)
    b[: a.shape[0]] = a
    return b


# The columns of a kept access
_R0, _R1, _C0, _C1, _INSTR, _ENG, _WRITE, _NEXT = range(8)


def _push_py(rec, nrec, r0, r1, c0, c1, instr, eng, write, head, cell):
    """``rec`` with access ``nrec`` set (grown if full), first in ``cell``'s list."""
    if nrec == rec.shape[0]:
        bigger = np.empty((2 * nrec, rec.shape[1]), rec.dtype)
        bigger[:nrec] = rec
        rec = bigger
    rec[nrec, _R0] = r0
    rec[nrec, _R1] = r1
    rec[nrec, _C0] = c0
    rec[nrec, _C1] = c1
    rec[nrec, _INSTR] = instr
    rec[nrec, _ENG] = eng
    rec[nrec, _WRITE] = write
    rec[nrec, _NEXT] = head[cell]
    head[cell] = nrec
    return rec


def _unlink_py(rec, head, cell, prev, nxt):
    """Take the access after ``prev`` (the cell's first if ``prev`` < 0) out of the cell's list."""
    if prev < 0:
        head[cell] = nxt
    else:
        rec[prev, _NEXT] = nxt


def _join_py(
    rec, nrec, head, kind, mark, jmem, buf, n, g, i, stamp, ar0, ar1, ac0, ac1, base, ncol,
    rb, cb,
):  # fmt: skip
    """Join ``g`` (node ``n + g``) from the accesses of ``kind`` (1: writes, 0: reads) that
    ``mark`` found inside read ``stamp`` of instruction ``i`` (rows ``ar0:ar1``, columns
    ``ac0:ac1`` of an object whose cells start at ``base``): each cell's records of them give
    way to one join record of that kind over their bounding box. Returns ``rec``, ``nrec``,
    and the members (their instructions and joins, once each) as ``buf`` and their count."""
    jid = n + g
    nb = 0
    for cr in range(ar0 // rb, (ar1 - 1) // rb + 1):
        for cc in range(ac0 // cb, (ac1 - 1) // cb + 1):
            cell = base + cr * ncol + cc
            b0 = b2 = _FAR
            b1 = b3 = -_FAR
            prev = -1
            k = head[cell]
            while k >= 0:
                nxt = rec[k, _NEXT]
                d = rec[k, _INSTR]
                k0, k1, k2, k3 = rec[k, _R0], rec[k, _R1], rec[k, _C0], rec[k, _C1]
                if (
                    rec[k, _WRITE] == kind
                    and d != i
                    and mark[d] == stamp
                    and ar0 <= k0
                    and k1 <= ar1
                    and ac0 <= k2
                    and k3 <= ac1
                ):  # inside the read (a join's record is one per cell: checked here)
                    b0 = min(b0, k0)
                    b1 = max(b1, k1)
                    b2 = min(b2, k2)
                    b3 = max(b3, k3)
                    if jmem[d] != jid:  # a member, once
                        jmem[d] = jid
                        if nb == buf.shape[0]:
                            buf = _grow(buf, 2 * nb)
                        buf[nb] = d
                        nb += 1
                    _unlink(rec, head, cell, prev, nxt)
                else:
                    prev = k
                k = nxt
            if b1 >= b0:  # something left this cell: the join's record
                rec = _push(rec, nrec, b0, b1, b2, b3, jid, -1, kind, head, cell)
                nrec += 1
    return rec, nrec, buf, nb


def _pruned_py(src, ns, engine, n, last, dst, nd):
    """``dst`` with the nodes ``src[:ns]`` (distinct) appended at ``nd``, in order: every
    compute-engine instruction and join, but on each DMA queue only the latest (queues
    complete in order: it implies the earlier ones). Returns ``dst`` and the new count."""
    for j in range(ns):
        d = src[j]
        ed = engine[d] if d < n else 0  # a join: kept
        if ed >= 4 and d > last[ed]:
            last[ed] = d
    start = nd
    for j in range(ns):
        d = src[j]
        ed = engine[d] if d < n else 0
        if ed < 4 or last[ed] == d:
            if nd == dst.shape[0]:
                dst = _grow(dst, 2 * nd)
            dst[nd] = d
            nd += 1
            if ed >= 4:
                last[ed] = -1
    dst[start:nd].sort()
    return dst, nd


# replaced by their compiled forms before the pass compiles
_grow = _grow_py
_grow_fill = _grow_fill_py
_push = _push_py
_unlink = _unlink_py
_join = _join_py
_pruned = _pruned_py


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
    join_min,
    read_join_min,
):
    n = op.shape[0]
    head = np.full(n_cells, -1, np.int64)
    # The accesses kept in the cells: rectangle, instruction, engine, write?, next in cell
    rec = np.empty((max(1024, 4 * n), 8), np.int64)
    nrec = 0
    ptr = np.zeros(n + 1, np.int64)
    didx = np.empty(max(1024, 2 * n), np.int32)
    nd = 0
    # Joins (nodes n, n + 1, ...): a read that finds at least `join_min` writes, or reads,
    # inside its region merges them into one, so later accesses wait for the join instead of
    # each of them (a tile written in P pieces and read whole R times: P + R edges, not P x R).
    # Per node (instruction or join): the instruction that last found it, whether it is inside
    # the read being checked (a write, a read: that read's stamp), of the join being made.
    seen = np.full(n + 1024, -1, np.int64)
    jmark = np.full(n + 1024, -1, np.int64)
    rmark = np.full(n + 1024, -1, np.int64)
    jmem = np.full(n + 1024, -1, np.int64)
    jptr = np.zeros(1024, np.int64)
    # Engines whose instructions end in program order (the Tensor Engine, DMA queues): there
    # a read that covers an older read of the same engine replaces it, since it cannot end
    # first. Vector, Scalar and GpSimd may start a later read before an earlier one (the
    # compiler's window: a program holds for any window it is scheduled with), or end it
    # first, so their reads stay until a write covers them (or a read merges them into a
    # join): a write waits for every read of what it overwrites.
    in_order = np.ones(n_engines, np.bool_)
    in_order[1:4] = False
    jidx = np.empty(1024, np.int32)
    n_join = 0
    njm = 0
    last = np.full(n_engines, -1, np.int64)
    found = np.empty(64, np.int64)  # what instruction i waits for
    members = np.empty(64, np.int64)  # of the join being made
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
            stamp = i * slots + a
            w_inside = 0  # distinct writes found inside this read's region
            r_inside = 0  # ... and reads
            for cr in range(ar0 // rb, (ar1 - 1) // rb + 1):
                for cc in range(ac0 // cb, (ac1 - 1) // cb + 1):
                    cell = obj_base[ob] + cr * obj_ncol[ob] + cc
                    prev = -1
                    k = head[cell]
                    while k >= 0:
                        nxt = rec[k, _NEXT]
                        d = rec[k, _INSTR]
                        kw = rec[k, _WRITE]
                        k0, k1, k2, k3 = rec[k, _R0], rec[k, _R1], rec[k, _C0], rec[k, _C1]
                        overl = k0 < ar1 and ar0 < k1 and k2 < ac1 and ac0 < k3
                        if overl and (wr == 1 or kw == 1) and d != i and seen[d] != i:
                            seen[d] = i
                            if nf == found.shape[0]:
                                found = _grow(found, 2 * nf)
                            found[nf] = d
                            nf += 1
                        contained = ar0 <= k0 and k1 <= ar1 and ac0 <= k2 and k3 <= ac1
                        if contained and (
                            wr == 1 or (kw == 0 and rec[k, _ENG] == e and in_order[e])
                        ):
                            _unlink(rec, head, cell, prev, nxt)  # covered by this write or read
                        else:
                            if contained and wr == 0 and d != i:
                                if kw == 1 and jmark[d] != stamp:
                                    jmark[d] = stamp
                                    w_inside += 1
                                elif kw == 0 and rmark[d] != stamp:
                                    rmark[d] = stamp
                                    r_inside += 1
                            prev = k
                        k = nxt
                    # record this access in the cell
                    rec = _push(rec, nrec, ar0, ar1, ac0, ac1, i, e, wr, head, cell)
                    nrec += 1
            for kind in range(2):  # the reads, then the writes, inside this read
                if (r_inside < read_join_min) if kind == 0 else (w_inside < join_min):
                    continue
                # They become one join (node n + n_join): their records leave the cells, so
                # the next access of the region finds one record per cell. This instruction
                # keeps its own dependencies on the writes (found above).
                if n + n_join + 1 > seen.shape[0]:
                    size = 2 * seen.shape[0]
                    seen = _grow_fill(seen, size, -1)
                    jmark = _grow_fill(jmark, size, -1)
                    rmark = _grow_fill(rmark, size, -1)
                    jmem = _grow_fill(jmem, size, -1)
                if n_join + 2 > jptr.shape[0]:
                    jptr = _grow_fill(jptr, 2 * jptr.shape[0], 0)
                rec, nrec, members, nb = _join(
                    rec, nrec, head, kind, rmark if kind == 0 else jmark, jmem, members, n,
                    n_join, i, stamp, ar0, ar1, ac0, ac1, obj_base[ob], obj_ncol[ob], rb, cb,
                )  # fmt: skip
                jidx, njm = _pruned(members, nb, engine, n, last, jidx, njm)
                n_join += 1
                jptr[n_join] = njm
            # A read-modify-write of the output (PSUM accumulation) also reads it: covered by
            # the write's RAW/WAW checks above.
        # DMA queues complete in order: the latest dependency on a queue implies the earlier
        # ones. Compute engines may run their instructions out of program order (the compiler
        # schedules them), so every dependency on them is kept.
        didx, nd = _pruned(found, nf, engine, n, last, didx, nd)
        ptr[i + 1] = nd
    return ptr, didx[:nd].copy(), jptr[: n_join + 1].copy(), jidx[:njm].copy()


_compiled = None


def _kernel():
    global _compiled, _grow, _grow_fill, _push, _unlink, _join, _pruned
    if _compiled is None:
        from numba import njit

        _grow = njit(cache=True)(_grow_py)
        _grow_fill = njit(cache=True)(_grow_fill_py)
        _push = njit(cache=True)(_push_py)
        _unlink = njit(cache=True)(_unlink_py)
        _join = njit(cache=True)(_join_py)
        _pruned = njit(cache=True)(_pruned_py)
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
    table: np.ndarray,
    tiles,
    tensors,
    params,
    n_engines: int,
    extra=None,
    hbm_reads=None,
    join_min: int | None = None,
    read_join_min: int | None = None,
):
    """CSR dependencies (``dep_ptr``, ``dep_idx``) of a recorded instruction table, and the
    joins they name (``join_ptr``, ``join_idx``: join ``j`` is node ``n + j`` and waits for
    ``join_idx[join_ptr[j]:join_ptr[j + 1]]``, instructions or earlier joins).

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
    join_min, read_join_min : int, optional
        Distinct writes, and reads, inside one read that the read merges into a join (at least
        2; None: :data:`JOIN_MIN`, :data:`READ_JOIN_MIN`).
    """
    join_min = JOIN_MIN if join_min is None else join_min
    read_join_min = READ_JOIN_MIN if read_join_min is None else read_join_min
    hint = "(accesses inside one read that it merges into a join: a join of one stands for nothing)"
    join_min = whole(join_min, "join_min", 2, None, KernelArgumentError, hint)
    read_join_min = whole(read_join_min, "read_join_min", 2, None, KernelArgumentError, hint)
    n = len(table)
    if n == 0:
        return (
            np.zeros(1, np.int64),
            np.zeros(0, np.int32),
            np.zeros(1, np.int64),
            np.zeros(0, np.int32),
        )
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
        int(join_min),
        int(read_join_min),
    )
