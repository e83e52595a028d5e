"""Which parts of an output tensor in HBM the kernel's stores have reached so far.

A load of an output tensor is refused until some store overlapped the region it reads (an
output counts as written where a store overlapped it, not only where stores cover it exactly).
A kernel may store thousands of regions and read each back, so the question is answered from a
grid of cells, each store painted into it once:

- cells a store covers entirely are marked *full*: a read touching one overlaps a store;
- a cell a store covers only in part keeps that store's region, checked exactly by a read
  touching the cell.

Tensors of up to ``mask_limit`` elements get one-element cells (the grid is an element mask, one
byte per element, and no cell is ever partial); bigger ones get cells shaped like the smallest
of the stores made before the grid was built (as the dependency pass shapes its HBM cells), at
most ``MAX_CELLS`` of them. A read costs the cells it touches plus the distinct regions kept in
its partial cells: linear for stores aligned to the cells (the usual case), more only for many
different misaligned stores over the same cells.
"""

from __future__ import annotations

import numpy as np

__all__ = ["MAX_CELLS", "StoredRegions"]

#: Cells of the grid of a tensor too big for an element mask.
MAX_CELLS = 2**22


class StoredRegions:
    """The grid of one tensor (``shape``), sized from the first stores (``regions``, each
    ``(r0, r1, c0, c1)``) when the tensor has more than ``mask_limit`` elements."""

    def __init__(self, shape: tuple[int, int], regions, mask_limit: int):
        rows, cols = shape
        if rows * cols <= mask_limit:
            rb = cb = 1
        else:
            rb = max(1, min(b - a for a, b, _, _ in regions))
            cb = max(1, min(d - c for _, _, c, d in regions))
            while -(-rows // rb) * -(-cols // cb) > MAX_CELLS:
                if -(-rows // rb) >= -(-cols // cb):
                    rb *= 2
                else:
                    cb *= 2
        self.shape = (rows, cols)
        self.cell = (rb, cb)
        grid = (-(-rows // rb), -(-cols // cb))
        self.full = np.zeros(grid, bool)  # cells some store covers entirely
        # cells with regions to check exactly (none in an element mask)
        self.partial = np.zeros(grid, bool) if rb * cb > 1 else None
        self.regions: dict[tuple[int, int], set[tuple[int, int, int, int]]] = {}

    def _cells(self, r0, r1, c0, c1) -> tuple[int, int, int, int]:
        rb, cb = self.cell
        return r0 // rb, -(-r1 // rb), c0 // cb, -(-c1 // cb)

    def add(self, r0: int, r1: int, c0: int, c1: int) -> None:
        """Paint one store region."""
        rb, cb = self.cell
        rows, cols = self.shape
        i0, i1, j0, j1 = self._cells(r0, r1, c0, c1)
        # cells wholly inside (a cell at the tensor's edge ends there)
        f0, f1 = -(-r0 // rb), (i1 if r1 == rows else r1 // rb)
        g0, g1 = -(-c0 // cb), (j1 if c1 == cols else c1 // cb)
        if f0 < f1 and g0 < g1:
            self.full[f0:f1, g0:g1] = True
        if (f0, f1, g0, g1) == (i0, i1, j0, j1):
            return
        # the ring of cells the region covers in part (its edges in cells, not its area)
        if f0 < f1 and g0 < g1:
            inner = range(f0, f1)
            edge_rows = (*range(i0, f0), *range(f1, i1))
        else:
            inner, edge_rows = range(0), range(i0, i1)
        cells = [(i, j) for i in edge_rows for j in range(j0, j1)]
        cells += [(i, j) for i in inner for j in (*range(j0, g0), *range(g1, j1))]
        for cell in cells:
            if self.full[cell]:
                continue  # any read touching it overlaps a store already
            self.partial[cell] = True
            self.regions.setdefault(cell, set()).add((r0, r1, c0, c1))

    def overlaps(self, r0: int, r1: int, c0: int, c1: int) -> bool:
        """Whether a painted store overlaps rows ``r0:r1``, columns ``c0:c1``."""
        i0, i1, j0, j1 = self._cells(r0, r1, c0, c1)
        if self.full[i0:i1, j0:j1].any():
            return True
        if self.partial is None:
            return False
        for i, j in zip(*np.nonzero(self.partial[i0:i1, j0:j1]), strict=True):
            for a, b, c, d in self.regions[(i0 + int(i), j0 + int(j))]:
                if a < r1 and r0 < b and c < c1 and c0 < d:
                    return True
        return False
