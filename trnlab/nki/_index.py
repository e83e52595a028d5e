"""Index expressions of older NKI editions: ``nl.arange`` and ``nl.mgrid``.

Older kernels address a tile with affine expressions over an index grid instead of slices::

    i_p, i_f = nl.mgrid[0:128, 0:512]            # a 2-D grid
    t = nl.load(x[i_p, i_f])                       # = x[0:128, 0:512]
    i_f1 = nl.arange(8)[None, :, None]             # axis 1 of a 3-D grid
    out[i_p0, i_f2 * 8 + i_f1] = ...               # a transposing view of the free axis

An :class:`IndexExpr` is ``const + sum(coeff * k_axis)`` over the grid's axes (``k_axis`` runs
over ``0 .. size - 1``). Indexing a tensor with expressions gives a view whose shape is the
grid's and whose strides follow from the coefficients: the same access the compiler derives,
with no values computed. Comparisons make masks (``mask=i_p < n``, :mod:`trnlab.nki._mask`).
"""

from __future__ import annotations

import numbers

from trnlab.core import KernelArgumentError

from ._errors import NotModelledError

__all__ = ["IndexExpr", "arange", "index_view", "mgrid"]


class IndexExpr:
    """``const + sum(coeff * k)`` over grid axes; ``terms`` maps an axis to ``(coeff, size)``.

    ``ndim`` is the grid's number of axes (``None`` for a 1-D ``nl.arange`` not yet placed
    with ``[:, None]``-style indexing, which counts as a 1-D grid)."""

    __slots__ = ("const", "ndim", "terms")

    def __init__(self, const: int, terms: dict, ndim: int | None):
        self.const = const
        self.terms = terms
        self.ndim = ndim

    # --- placing a 1-D range on a grid axis: nl.arange(n)[:, None] ------------------------------
    def __getitem__(self, key) -> IndexExpr:
        key = key if isinstance(key, tuple) else (key,)
        if self.ndim is not None or len(self.terms) != 1:
            raise NotModelledError(
                "indexing an index expression other than a fresh nl.arange (to place it on a "
                "grid axis, nl.arange(n)[:, None]) is not modelled"
            )
        axes = [i for i, k in enumerate(key) if isinstance(k, slice)]
        if len(axes) != 1 or any(k is not None for k in key if not isinstance(k, slice)):
            raise KernelArgumentError(
                f"nl.arange(...)[{key}]: place the range with one ':' among Nones, e.g. "
                f"[:, None] for the partition axis or [None, :] for a free axis"
            )
        if key[axes[0]] != slice(None):
            raise NotModelledError("slicing an nl.arange is not modelled; use nl.arange(a, b)")
        ((coeff, size),) = self.terms.values()
        return IndexExpr(self.const, {axes[0]: (coeff, size)}, len(key))

    # --- arithmetic -------------------------------------------------------------------------
    def _grid(self, other: IndexExpr) -> int | None:
        a, b = self.ndim, other.ndim
        if a is not None and b is not None and a != b:
            raise KernelArgumentError(
                f"index expressions on grids of {a} and {b} axes cannot be combined"
            )
        return a if a is not None else b

    def __add__(self, other) -> IndexExpr:
        if isinstance(other, IndexExpr):
            ndim = self._grid(other)
            terms = dict(self.terms)
            if (self.ndim is None and self.terms and other.ndim is not None) or (
                other.ndim is None and other.terms and self.ndim is not None
            ):
                raise KernelArgumentError(_UNPLACED)
            terms = {ax: cn for ax, cn in terms.items() if cn[1] != 1}
            for ax, (c, n) in other.terms.items():
                if n == 1:
                    continue
                if ax in terms:
                    c0, n0 = terms[ax]
                    if n0 != n:
                        raise KernelArgumentError(
                            f"index expressions disagree on the size of grid axis {ax} ({n0} "
                            f"and {n})"
                        )
                    terms[ax] = (c0 + c, n)
                else:
                    terms[ax] = (c, n)
            return IndexExpr(self.const + other.const, terms, ndim)
        if isinstance(other, numbers.Integral) and not isinstance(other, bool):
            return IndexExpr(self.const + int(other), dict(self.terms), self.ndim)
        return NotImplemented

    __radd__ = __add__

    def __neg__(self) -> IndexExpr:
        return self * -1

    def __sub__(self, other) -> IndexExpr:
        return self + (-other)

    def __rsub__(self, other) -> IndexExpr:
        return (-self) + other

    def __mul__(self, other) -> IndexExpr:
        if isinstance(other, numbers.Integral) and not isinstance(other, bool):
            k = int(other)
            terms = {ax: (c * k, n) for ax, (c, n) in self.terms.items()}
            return IndexExpr(self.const * k, terms, self.ndim)
        if isinstance(other, IndexExpr):
            raise NotModelledError(
                "a product of two index expressions is not affine; trnlab.nki models affine "
                "index expressions (integer multiples and sums of nl.arange / nl.mgrid)"
            )
        return NotImplemented

    __rmul__ = __mul__

    def _compare(op: str):
        def f(self, other):
            from ._mask import compare

            return compare(self, other, op)

        f.__name__ = f"__{op}__"
        return f

    __lt__ = _compare("<")
    __le__ = _compare("<=")
    __gt__ = _compare(">")
    __ge__ = _compare(">=")
    del _compare

    def _equality(self, other):
        raise NotModelledError(
            "a mask of == or != on an index expression (one row, or all but one) is not "
            "modelled; index that row with an integer, or use <, <=, >, >= (masks joined with "
            "&); for a predicate on values (a causal mask), use nisa.affine_select"
        )

    __eq__ = __ne__ = _equality
    __hash__ = None

    def __repr__(self) -> str:
        parts = [f"{c}*k{ax}[0:{n}]" for ax, (c, n) in sorted(self.terms.items())]
        return f"IndexExpr({' + '.join([str(self.const), *parts])})"


_UNPLACED = (
    "a 1-D nl.arange(n) must be placed on a grid axis before it is combined with other index "
    "expressions or used to index a multi-dimensional tile: nl.arange(n)[:, None] (partition "
    "axis) or nl.arange(n)[None, :] (free axis); NKI refuses 1-D aranges too"
)


def _int(x, what: str) -> int:
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        raise KernelArgumentError(f"{what} must be a whole number, not {x!r}")
    return int(x)


def arange(start, stop=None, step=1) -> IndexExpr:
    """``nl.arange(n)`` or ``nl.arange(start, stop[, step])``: a 1-D index range, placed on a
    grid axis with ``[:, None]``-style indexing."""
    if stop is None:
        start, stop = 0, start
    start, stop, step = _int(start, "start"), _int(stop, "stop"), _int(step, "step")
    if step < 1 or stop <= start:
        raise KernelArgumentError(f"nl.arange({start}, {stop}, {step}) is empty or steps back")
    size = -(-(stop - start) // step)
    return IndexExpr(start, {0: (step, size)}, None)


class Grid(tuple):
    """The expressions of an ``nl.mgrid``: unpack them (``i_p, i_f = nl.mgrid[...]``) or name
    them: ``grid.p`` the partition axis, ``grid.x``, ``grid.y``, ``grid.z`` the free axes."""

    __slots__ = ()

    def _axis(self, i: int, name: str) -> IndexExpr:
        if i >= len(self):
            raise AttributeError(f"a {len(self)}-axis nl.mgrid has no .{name}")
        return self[i]

    p = property(lambda self: self._axis(0, "p"))
    x = property(lambda self: self._axis(1, "x"))
    y = property(lambda self: self._axis(2, "y"))
    z = property(lambda self: self._axis(3, "z"))


class _MGrid:
    """``nl.mgrid[0:128, 0:512]``: one index expression per axis of the grid."""

    def __getitem__(self, key) -> tuple[IndexExpr, ...]:
        key = key if isinstance(key, tuple) else (key,)
        ranges = []
        for s in key:
            if not isinstance(s, slice) or s.stop is None:
                raise KernelArgumentError(f"nl.mgrid takes slices start:stop, not {s!r}")
            r = arange(0 if s.start is None else s.start, s.stop, 1 if s.step is None else s.step)
            ((c, n),) = r.terms.values()
            ranges.append((r.const, c, n))
        out = []
        for ax, (const, c, _) in enumerate(ranges):  # dense, as numpy.mgrid: every axis's size
            terms = {a: (c if a == ax else 0, n) for a, (_, _, n) in enumerate(ranges)}
            out.append(IndexExpr(const, terms, len(key)))
        return Grid(out) if len(out) > 1 else out[0]

    def __repr__(self) -> str:
        return "nl.mgrid"


mgrid = _MGrid()


def index_view(t, key: tuple):
    """The view of tensor ``t`` that ``t[key]`` addresses when ``key`` holds index expressions
    (and integers): the grid's shape, strides from the expressions' coefficients."""
    from ._tensor import NkiTensor, _index_error

    if len(key) != t.ndim:
        raise KernelArgumentError(
            f"index {t}: give one index expression (or integer) per dimension ({t.ndim}), "
            f"got {len(key)}"
        )
    exprs = []
    for d, k in enumerate(key):
        if isinstance(k, IndexExpr):
            exprs.append(k)
        elif isinstance(k, numbers.Integral) and not isinstance(k, bool):
            i = int(k)
            if not -t.shape[d] <= i < t.shape[d]:
                raise _index_error(f"index {i} is outside 0..{t.shape[d] - 1} of dim {d} of {t}")
            exprs.append(IndexExpr(i % t.shape[d], {}, None))  # negative counts from the end
        elif isinstance(k, NkiTensor):
            raise NotModelledError(
                f"indexing dimension {d} of {t} by the values of tile {k.name!r} (an indirect, "
                f"data-dependent DMA) is not modelled yet in trnlab.nki; index with integers, "
                f"slices or affine nl.arange / nl.mgrid expressions"
            )
        else:
            raise KernelArgumentError(
                f"dimension {d} mixes a {type(k).__name__} with nl.arange / nl.mgrid "
                f"expressions in one index, which NKI refuses too: use expressions (or "
                f"integers) for every dimension, or slices for every dimension"
            )
    grid = {e.ndim for e in exprs if e.ndim is not None}
    if len(grid) > 1:
        raise KernelArgumentError(f"the index expressions of {t} use grids of {sorted(grid)} axes")
    if any(e.ndim is None and e.terms for e in exprs) and (grid or t._s.on_chip):
        raise KernelArgumentError(_UNPLACED)
    ndim = grid.pop() if grid else 1
    sizes = [1] * ndim
    for e in exprs:
        for ax, (_, n) in e.terms.items():
            if n == 1:
                continue
            if sizes[ax] not in (1, n):
                raise KernelArgumentError(
                    f"the index expressions of {t} disagree on the size of grid axis {ax} "
                    f"({sizes[ax]} and {n})"
                )
            sizes[ax] = n
    offset = t.offset
    strides = [0] * ndim
    for d, (e, n, s) in enumerate(zip(exprs, t.shape, t.strides, strict=True)):
        lo = hi = e.const
        for ax, (c, m) in e.terms.items():
            if m == 1:
                continue
            strides[ax] += c * s
            lo += min(0, c * (m - 1))
            hi += max(0, c * (m - 1))
        if lo < 0 or hi >= n:
            error = _index_error(
                f"index expression {e} reaches {lo}..{hi} on dimension {d} of {t} (size {n})"
                + (
                    ""
                    if t._s.on_chip
                    else "; a masked nl.load / nl.store may reach past the "
                    "tensor where its mask (mask=(i * 128 + i_p < n)) is false"
                )
            )
            if t._s.on_chip:
                raise error
            from ._mask import Overhang

            return Overhang(t, key, tuple(sizes), error)
        offset += e.const * s
    if t._s.on_chip and t.ndim >= 2 and t.strides[0] >= t._s.free:
        bad = [ax for ax, (c, m) in exprs[0].terms.items() if ax != 0 and m > 1 and c]
        if bad or any(0 in e.terms and e.terms[0][0] and e.terms[0][1] > 1 for e in exprs[1:]):
            raise KernelArgumentError(
                f"the partition index of {t} must run along the first grid axis only "
                f"(nl.arange(n)[:, None], i_p of nl.mgrid) and no free index may use that axis: "
                f"the engines cannot move data across partitions (use nisa.nc_transpose)"
            )
    for ax in range(min(ndim, t.ndim)):  # a size-1 axis keeps its dimension's stride (no
        if sizes[ax] == 1 and strides[ax] == 0:  # address depends on it), so a one-partition
            strides[ax] = t.strides[ax]  # grid still reads as partitions, not blocks
    return NkiTensor(t._s, tuple(sizes), tuple(strides), offset)
