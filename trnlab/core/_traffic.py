"""Where a kernel's bytes and time go: HBM traffic per tensor, bytes between the memories and
the engines, the busiest engine or DMA queue, and how many engine passes each output element
made after leaving PSUM.

All of it is read from a :class:`~trnlab.core.Run`'s instruction table (regions, formats, start
and end times), so it describes what the kernel did, whatever its tile sizes or loop order.
Regions of strided accesses are their bounding boxes (as the engine model records them).

>>> import numpy as np
>>> from trnlab import core, kernels
>>> run = kernels.matmul((512, 512), (512, 1024), variant="tiled", numerics=False)
>>> t = core.hbm_traffic(run)
>>> t["b"]["loaded"] / t["b"]["size"]   # B is loaded once per 128-row tile of A: 4 times
4.0
"""

from __future__ import annotations

import math

import numpy as np

from trnlab._checks import choose, short

from . import _program as P
from ._errors import KernelArgumentError, UnknownFigureError
from ._tiles import format_bits

__all__ = ["element_passes", "hbm_traffic", "time_breakdown", "traffic"]

#: Where bytes flow (the arrows of :func:`traffic`), in the order a picture draws them.
ARROWS = (
    ("HBM", "SBUF"),
    ("SBUF", "Tensor"),
    ("Tensor", "PSUM"),
    ("PSUM", "Vector"),
    ("PSUM", "Scalar"),
    ("SBUF", "Vector"),
    ("SBUF", "Scalar"),
    ("SBUF", "GpSimd"),
    ("Vector", "SBUF"),
    ("Scalar", "SBUF"),
    ("GpSimd", "SBUF"),
    ("Vector", "PSUM"),
    ("Scalar", "PSUM"),
    ("GpSimd", "PSUM"),
    ("SBUF", "SBUF"),  # a DMA between partitions
    ("SBUF", "HBM"),
    ("HBM", "HBM"),  # a DMA from one HBM tensor to another
)


def _checked(run, what: str):
    """``run`` if it is a :class:`~trnlab.core.Run`, else a teaching error."""
    from ._run import Run

    if not isinstance(run, Run):
        raise KernelArgumentError(
            f"{what} reads a finished run (a core.Run, what kernels.matmul, nki.profile and "
            f"core.run return), not {short(run)}"
        )
    return run


def _tensor_bytes(rec) -> float:
    rows, cols = rec.shape
    return math.ceil(rows * cols * format_bits(rec.fmt) / 8)


def hbm_traffic(run) -> dict[str, dict[str, float]]:
    """Bytes each HBM tensor moved: ``{name: {"size", "loaded", "stored", "loads", "stores"}}``.

    ``loaded / size`` is how many times the kernel read the tensor over (1.0: each byte once);
    ``size`` is the tensor's own bytes in its format.
    """
    run = _checked(run, "core.hbm_traffic")
    t = run.program.table
    # An HBM -> HBM copy reads its source (recorded apart; the hbm column is the destination)
    # and writes its destination in the destination's format (the bytes column is the
    # source's).
    src = np.full(len(t), -1, np.int64)
    written = t["bytes"].astype(np.float64)
    for i, (h, _region) in run.program.hbm_reads.items():
        src[i] = h
        dst_bits = format_bits(run.program.tensors[int(t["hbm"][i])].fmt)
        written[i] = math.ceil(written[i] * dst_bits / float(t["bits"][i]))
    # Per tensor, in one pass over the table (bincount by tensor id), not one per tensor.
    n_t = len(run.program.tensors)
    hbm = t["hbm"].astype(np.int64)
    moved = t["bytes"].astype(np.float64)
    load = (t["op"] == P.DMA_LOAD) & (hbm >= 0)
    store = np.isin(t["op"], P.HBM_WRITES) & (hbm >= 0)
    from_src = src >= 0
    load_ids = np.concatenate([hbm[load], src[from_src]])
    load_bytes = np.concatenate([moved[load], moved[from_src]])
    loaded = np.bincount(load_ids, weights=load_bytes, minlength=n_t)
    loads = np.bincount(load_ids, minlength=n_t)
    stored = np.bincount(hbm[store], weights=written[store], minlength=n_t)
    stores = np.bincount(hbm[store], minlength=n_t)
    return {
        rec.name: {
            "size": float(_tensor_bytes(rec)),
            "loaded": float(loaded[rec.id]),
            "stored": float(stored[rec.id]),
            "loads": int(loads[rec.id]),
            "stores": int(stores[rec.id]),
        }
        for rec in run.program.tensors
    }


def _region_bytes(table, col: str, tiles, sel: np.ndarray) -> float:
    """Bytes of the ``col`` tile regions of the selected instructions, in each tile's format."""
    ids = table[col][sel]
    reg = table[f"{col}_region"][sel].astype(np.int64)
    ok = ids >= 0
    if not ok.any():
        return 0.0
    bits = np.array([format_bits(tiles[int(i)].fmt) for i in ids[ok]])
    cells = (reg[ok, 1] - reg[ok, 0]) * (reg[ok, 3] - reg[ok, 2])
    return float(np.sum(cells * bits / 8))


def traffic(run) -> dict[tuple[str, str], float]:
    """Bytes along each arrow between HBM, SBUF, PSUM and the engines (:data:`ARROWS`).

    HBM <-> SBUF are the DMA bytes; an engine's arrows are the bytes of the tile regions it
    read (from SBUF or PSUM) and wrote; a matmul's PSUM bytes are its fp32 results (4 B each,
    also when it accumulates). Arrows with no bytes are left out.
    """
    run = _checked(run, "core.traffic")
    t = run.program.table
    tiles = run.program.tiles
    space = np.array([r.space for r in tiles] or ["sbuf"])
    flows: dict[tuple[str, str], float] = {}

    def add(key, value):
        if value > 0:
            flows[key] = flows.get(key, 0.0) + value

    op, eng = t["op"], t["engine"]
    add(("HBM", "SBUF"), float(t["bytes"][op == P.DMA_LOAD].sum()))
    add(("SBUF", "HBM"), float(t["bytes"][op == P.DMA_STORE].sum()))
    add(("SBUF", "SBUF"), float(t["bytes"][op == P.DMA_SBUF].sum()))
    add(("HBM", "HBM"), float(t["bytes"][op == P.DMA_HBM].sum()))
    te = (op == P.MATMUL) | (op == P.TRANSPOSE)
    for col in ("in0", "in1"):
        add(("SBUF", "Tensor"), _region_bytes(t, col, tiles, te))
    reg = t["out_region"][te].astype(np.int64)
    add(("Tensor", "PSUM"), float(np.sum((reg[:, 1] - reg[:, 0]) * (reg[:, 3] - reg[:, 2]) * 4)))
    for e, name in ((P.VECTOR, "Vector"), (P.SCALAR, "Scalar"), (P.GPSIMD, "GpSimd")):
        mine = eng == e
        for col in ("in0", "in1", "in2"):
            ids = t[col]
            for where in ("sbuf", "psum"):
                sel = mine & (ids >= 0)
                sel[sel] = space[ids[sel]] == where
                add((where.upper(), name), _region_bytes(t, col, tiles, sel))
        for where in ("sbuf", "psum"):
            sel = mine & (t["out"] >= 0)
            sel[sel] = space[t["out"][sel]] == where
            add((name, where.upper()), _region_bytes(t, "out", tiles, sel))
    order = {a: i for i, a in enumerate(ARROWS)}
    return dict(sorted(flows.items(), key=lambda kv: order.get(kv[0], len(order))))


def _union(starts: np.ndarray, ends: np.ndarray) -> float:
    """Length of the union of the intervals [start, end)."""
    if not len(starts):
        return 0.0
    order = np.argsort(starts)
    s, e = starts[order], ends[order]
    total, cur_s, cur_e = 0.0, s[0], e[0]
    for a, b in zip(s[1:], e[1:], strict=True):
        if a > cur_e:
            total += cur_e - cur_s
            cur_s, cur_e = a, b
        else:
            cur_e = max(cur_e, b)
    return float(total + cur_e - cur_s)


def time_breakdown(run) -> list[dict]:
    """Each engine and DMA queue, busiest first: how long it was busy and with what.

    Rows: ``{"resource", "busy_s", "fraction", "instructions", "tensors", "bytes"}``; busy time
    is the union of its instructions' intervals (a DMA: from its set-up on the queue to its
    last byte), ``fraction`` of the run's latency; ``tensors`` names the HBM tensors a queue
    carried. The first row is what bounds the kernel when its fraction is near 1.
    """
    run = _checked(run, "core.time_breakdown")
    t = run.program.table
    names = {r.id: r.name for r in run.program.tensors}
    rows = []
    reads = run.program.hbm_reads  # an HBM -> HBM copy carries its source tensor too
    for e in np.unique(t["engine"]):
        sel = t["engine"] == e
        busy = _union(run.start[sel], run.issue_end[sel])
        hbm = t["hbm"][sel].tolist() + [reads[i][0] for i in np.flatnonzero(sel) if i in reads]
        rows.append(
            {
                "resource": P.engine_name(int(e)),
                "busy_s": busy,
                "fraction": busy / run.latency if run.latency > 0 else 0.0,
                "instructions": int(sel.sum()),
                "tensors": sorted({names[int(h)] for h in hbm if h >= 0}),
                "bytes": float(t["bytes"][sel].sum()),
            }
        )
    return sorted(rows, key=lambda r: -r["busy_s"])


def element_passes(run, name: str) -> dict[str, np.ndarray]:
    """Per element of HBM tensor ``name``: how its stored value left PSUM, and how often it
    crossed HBM.

    Returns ``{"passes", "stores", "loads"}``, arrays of the tensor's ``[rows, cols]`` shape:
    ``passes`` is the number of Vector / Scalar / GpSimd instructions between the matmul that
    produced the value in PSUM and its last store (1: fused in the instruction that empties
    PSUM; ``-1`` never stored; a large value (1000 +) when the stored value does not come from
    PSUM at all); ``stores`` and ``loads`` count the DMAs that wrote or read each element.
    Values read back from HBM keep the passes they were stored with, so a second pass through
    HBM counts. Elementwise where an input region has the output region's shape, else per
    partition (a broadcast operand such as a bias column).
    """
    prog = _checked(run, "core.element_passes").program
    name = choose(
        name, [r.name for r in prog.tensors], "HBM tensor of this run", UnknownFigureError
    )
    recs = [r for r in prog.tensors if r.name == name]
    target = recs[0].id
    none = 1000  # "no PSUM origin" (inputs from HBM)
    hbm = _Lazy(prog.tensors, none, P.written_tensors(prog.table) | {target})
    hbm_stored = np.zeros(recs[0].shape, np.int32)
    hbm_loaded = np.zeros(recs[0].shape, np.int32)
    hbm[target][:] = -1
    # A tile's array exists from its first use to its free, not for the whole run (a kernel
    # that allocates and frees tiles in a loop would otherwise hold every tile it ever had).
    depth = _Lazy(prog.tiles, none)
    freed_at: dict[int, list[int]] = {}
    for rec in prog.tiles:
        if rec.free_instr >= 0:
            freed_at.setdefault(rec.free_instr, []).append(rec.id)
    t = prog.table
    for i in range(len(t)):
        for tid in freed_at.get(i, ()):
            depth.pop(tid, None)
        row = t[i]
        op = int(row["op"])
        if op == P.DMA_HBM:  # a copy: the values keep their passes
            h, (q0, q1, g0, g1) = prog.hbm_reads[i]
            r0, r1, c0, c1 = (int(v) for v in row["hbm_region"])
            d = int(row["hbm"])
            hbm[d][r0:r1, c0:c1] = _fit(hbm[h][q0:q1, g0:g1].copy(), (r1 - r0, c1 - c0))
            if h == target:
                hbm_loaded[q0:q1, g0:g1] += 1
            if d == target:
                hbm_stored[r0:r1, c0:c1] += 1
            continue
        if op in (P.DMA_LOAD, P.DMA_STORE):
            h = int(row["hbm"])
            r0, r1, c0, c1 = (int(v) for v in row["hbm_region"])
            tid = int(row["out"] if op == P.DMA_LOAD else row["in0"])
            p0, p1, f0, f1 = (
                int(v) for v in row["out_region" if op == P.DMA_LOAD else "in0_region"]
            )
            tile = depth[tid][p0:p1, f0:f1]
            mem = hbm[h][r0:r1, c0:c1]
            if op == P.DMA_LOAD:
                src = np.where(mem < 0, none, mem)
                tile[...] = _fit(src, tile.shape)
                if h == target:
                    hbm_loaded[r0:r1, c0:c1] += 1
            else:
                mem[...] = _fit(tile, mem.shape)
                if h == target:
                    hbm_stored[r0:r1, c0:c1] += 1
            continue
        out = int(row["out"])
        if out < 0:
            continue
        p0, p1, f0, f1 = (int(v) for v in row["out_region"])
        region = depth[out][p0:p1, f0:f1]
        if op == P.DMA_SBUF:  # a copy between partitions: the values keep their passes
            q0, q1, g0, g1 = (int(v) for v in row["in0_region"])
            region[...] = _fit(depth[int(row["in0"])][q0:q1, g0:g1].copy(), region.shape)
            continue
        if op in (P.MATMUL, P.TRANSPOSE):
            region[...] = 0
            continue
        best = np.full(region.shape, none, np.int32)
        for col in ("in0", "in1", "in2"):
            tid = int(row[col])
            if tid < 0:
                continue
            q0, q1, g0, g1 = (int(v) for v in row[f"{col}_region"])
            src = depth[tid][q0:q1, g0:g1]
            if src.shape == region.shape:
                best = np.minimum(best, src)
            else:  # per partition: a [P, 1] operand, or a strided view's bounding box
                per = src.max(axis=1) if src.size else np.full(q1 - q0, none)
                best = np.minimum(best, _fit(per[:, None], (region.shape[0], 1)))
        region[...] = np.minimum(best + 1, none)
    passes = hbm[target]
    return {"passes": passes, "stores": hbm_stored, "loads": hbm_loaded}


class _Lazy(dict):
    """Per tile (or HBM tensor) id, an int32 array of its shape filled with ``fill``, made on
    first use; ids outside ``writable`` (an HBM tensor nothing writes) get a read-only view of
    the one value instead of an array of their size."""

    def __init__(self, records, fill: int, writable=None):
        super().__init__()
        self._records = records
        self._fill = fill
        self._writable = writable

    def __missing__(self, key: int) -> np.ndarray:
        shape = self._records[key].shape
        if self._writable is not None and key not in self._writable:
            a = np.broadcast_to(np.int32(self._fill), shape)
        else:
            a = np.full(shape, self._fill, np.int32)
        self[key] = a
        return a


def _fit(values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``values`` laid onto ``shape`` in row-major order (a DMA streams elements in order), or
    broadcast per partition when it is a column."""
    if values.shape == shape:
        return values
    if values.size == math.prod(shape):
        return values.reshape(shape)
    if values.ndim == 2 and values.shape[1] == 1 and values.shape[0] == shape[0]:
        return np.broadcast_to(values, shape)
    flat = values.reshape(-1)
    n = math.prod(shape)
    return np.resize(flat, n).reshape(shape) if flat.size else np.full(shape, 1000, np.int32)
