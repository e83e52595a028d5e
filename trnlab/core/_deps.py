"""Dependencies between instructions, tracked on rectangular regions of tiles and HBM tensors.

An instruction that reads a region waits for the earlier writes overlapping it (read after
write); one that writes waits for earlier writes and reads of the region (write after write,
write after read: the explicit buffer reuse a kernel makes by writing a tile again). Engines
and DMA queues run in order, so only the latest dependency on each engine is kept, and an
access subsumes earlier ones it contains on the same engine, which keeps the lists short.
"""

from __future__ import annotations

from ._errors import UnwrittenReadError
from ._tiles import HBMTensor

__all__ = ["Tracker"]


def _overlap(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]


def _contains(outer, inner) -> bool:
    return (
        outer[0] <= inner[0]
        and inner[1] <= outer[1]
        and outer[2] <= inner[2]
        and inner[3] <= outer[3]
    )


class Tracker:
    """Region bookkeeping of one recording: per-tile lists live on the tiles, per-tensor here."""

    def __init__(self):
        self.engines: list[int] = []  # engine of every recorded instruction
        self.versions: dict[int, int] = {}  # tile id -> number of writes so far
        self.hbm: dict[int, tuple[list, list]] = {}  # tensor id -> (writes, reads)

    def add_tensor(self, t: HBMTensor) -> None:
        self.hbm[t.id] = ([], [])

    def add_tile(self, tid: int) -> None:
        self.versions[tid] = 0

    def access(self, i: int, what: str, engine: int, reads, writes, hreads, hwrites) -> list[int]:
        """Check and record instruction ``i``'s accesses; return what it waits for.

        Raises
        ------
        UnwrittenReadError
            A read of a tile region (or an output tensor region) nothing has written.
        """
        deps: set[int] = set()
        for v in (*reads, *writes):
            if v.tile.inherited:  # memory of freed tiles: wait until they are done with it
                deps.update(v.tile.inherited)
                v.tile.inherited = []
        for v in reads:
            t, reg = v.tile, v.region
            if not t.fully_written and not t.written_mask[reg[0] : reg[1], reg[2] : reg[3]].all():
                raise UnwrittenReadError(
                    f"instruction #{i} ({what}) reads {t.space.upper()} tile "
                    f"{t.name!r}[{reg[0]}:{reg[1]}, {reg[2]}:{reg[3]}], part of which nothing has "
                    f"written yet. Load it (DMA), compute it, or memset it before reading."
                )
            deps.update(w[4] for w in t.writes if _overlap(w, reg))
        for v in writes:
            t, reg = v.tile, v.region
            deps.update(w[4] for w in t.writes if _overlap(w, reg))
            deps.update(r[4] for r in t.reads if _overlap(r, reg))
        for h in hreads:
            reg = (h.r0, h.r1, h.c0, h.c1)
            w_list, _ = self.hbm[h.tensor.id]
            # An output tensor counts as written where any store overlapped (not exact cover).
            if not h.tensor.written and not any(_overlap(w, reg) for w in w_list):
                raise UnwrittenReadError(
                    f"instruction #{i} loads HBM tensor {h.tensor.name!r}[{reg[0]}:{reg[1]}, "
                    f"{reg[2]}:{reg[3]}], which no instruction has stored yet."
                )
            deps.update(w[4] for w in w_list if _overlap(w, reg))
        for h in hwrites:
            reg = (h.r0, h.r1, h.c0, h.c1)
            w_list, r_list = self.hbm[h.tensor.id]
            deps.update(w[4] for w in w_list if _overlap(w, reg))
            deps.update(r[4] for r in r_list if _overlap(r, reg))
        # Bookkeeping: a later access on the same in-order engine subsumes an earlier one.
        for v in reads:
            t, reg = v.tile, v.region
            t.reads = [r for r in t.reads if not (r[5] == engine and _contains(reg, r))]
            t.reads.append((*reg, i, engine))
        for v in writes:
            t, reg = v.tile, v.region
            t.writes = [w for w in t.writes if not _contains(reg, w)]
            t.writes.append((*reg, i, engine))
            t.reads = [r for r in t.reads if not _contains(reg, r)]
            if not t.fully_written:
                t.written_mask[reg[0] : reg[1], reg[2] : reg[3]] = True
                t.fully_written = bool(t.written_mask.all())
            self.versions[t.id] += 1
        for h in hreads:  # appended only: HBM inputs are read often and rarely written
            self.hbm[h.tensor.id][1].append((h.r0, h.r1, h.c0, h.c1, i, engine))
        for h in hwrites:
            reg = (h.r0, h.r1, h.c0, h.c1)
            w_list, r_list = self.hbm[h.tensor.id]
            w_list[:] = [w for w in w_list if not _contains(reg, w)]
            w_list.append((*reg, i, engine))
            r_list[:] = [r for r in r_list if not _contains(reg, r)]
        # One dependency per engine is enough: engines (and DMA queues) run in order.
        last: dict[int, int] = {}
        for d in deps:
            e = self.engines[d]
            if d > last.get(e, -1):
                last[e] = d
        self.engines.append(engine)
        return sorted(last.values())
