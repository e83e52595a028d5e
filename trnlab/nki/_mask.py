"""Masks of older NKI editions: ``mask=(i * 128 + i_p < n)``.

A comparison of an index expression (:mod:`trnlab.nki._index`) with a number is a predicate
over the index grid; ``&`` joins predicates. An instruction given a mask runs only where it
holds. The usual use is the last, partial tile of a loop::

    i_p = nl.arange(128)[:, None]
    t = nl.load(x[i * 128 + i_p, i_f], mask=(i * 128 + i_p < n))   # rows past n not touched

Each comparison of one grid axis keeps a contiguous range of that axis (the expressions are
affine), so a mask keeps a rectangle of the grid: the instruction is the same instruction on
that rectangle of each operand. The access ``x[i * 128 + i_p, i_f]`` may reach past the tensor
where the mask is false; it is an :class:`Overhang` until a masked ``nl.load`` / ``nl.store``
takes the rectangle, and an index error anywhere else. Predicates over two axes at once (a
triangle) are not rectangles: they raise a NotModelledError pointing at ``affine_select``.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers

import numpy as np

from trnlab.core import KernelArgumentError

from ._errors import NotModelledError
from ._index import IndexExpr, index_view

__all__ = ["Mask", "Overhang", "apply_mask", "check_mask", "give_masks", "whole_grid_only"]

_OPS = {
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}


def compare(expr: IndexExpr, other, op: str) -> Mask:
    """``expr <op> other``: a mask (``other`` a whole number or an index expression)."""
    if isinstance(other, IndexExpr):
        return compare(expr - other, 0, op)
    if (
        isinstance(other, bool)
        or not isinstance(other, numbers.Real)
        or not math.isfinite(float(other))
    ):
        raise KernelArgumentError(
            f"a mask compares an index expression with a finite number or another expression, "
            f"not {other!r}"
        )
    return Mask([(expr, op, other)])


class Mask:
    """A conjunction of ``(expression, op, bound)`` predicates over one index grid."""

    __slots__ = ("terms",)

    def __init__(self, terms: list):
        self.terms = terms

    def __and__(self, other) -> Mask:
        if not isinstance(other, Mask):
            raise KernelArgumentError(f"a mask joins another mask with &, not {other!r}")
        return Mask(self.terms + other.terms)

    def __or__(self, other):
        raise NotModelledError(
            "a mask joined with | (a union) is not modelled: it is not a rectangle of the "
            "grid. Split the instruction in two, one per mask"
        )

    __ror__ = __or__

    def __bool__(self):
        raise KernelArgumentError(
            "a mask has no truth value while the kernel is traced: join masks with &, not "
            "'and' (NKI refuses 'and' too; a chained comparison 0 <= i_p < n is an 'and' as "
            "well: write (i_p >= 0) & (i_p < n)), and pass the mask as mask=..."
        )

    def _sizes(self) -> dict[int, int]:
        sizes: dict[int, int] = {}
        for e, _, _ in self.terms:
            for ax, (_, n) in e.terms.items():
                if n > 1:
                    if sizes.get(ax, n) != n:
                        raise KernelArgumentError(
                            f"the comparisons of a mask disagree on the size of grid axis {ax} "
                            f"({sizes[ax]} and {n}); build them from the same nl.arange / "
                            f"nl.mgrid"
                        )
                    sizes[ax] = n
        return sizes

    def rectangle(self, what: str) -> dict[int, tuple[int, int]] | None:
        """``{axis: (lo, hi)}``: the range of each grid axis the mask keeps (axes it keeps
        whole are left out); None when it keeps nothing (NKI then skips the instruction)."""
        sizes = self._sizes()
        keep = {ax: np.ones(n, bool) for ax, n in sizes.items()}
        for e, op, bound in self.terms:
            axes = [ax for ax, (c, n) in e.terms.items() if n > 1 and c]
            if not axes:
                if not _OPS[op](e.const, bound):
                    return None
                continue
            if len(axes) > 1:
                raise NotModelledError(
                    f"{what}: a mask over two grid axes at once ({e} {op} {bound}, a triangle "
                    f"rather than a rectangle) is not modelled; use nisa.affine_select for a "
                    f"predicate such as a causal mask"
                )
            (ax,) = axes
            c, n = e.terms[ax]
            keep[ax] &= _OPS[op](e.const + c * np.arange(n), bound)
        out = {}
        for ax, k in keep.items():
            idx = np.flatnonzero(k)
            if idx.size == 0:
                return None
            if idx.size < sizes[ax]:
                out[ax] = (int(idx[0]), int(idx[-1]) + 1)
        return out

    def __repr__(self) -> str:
        return "Mask(" + " & ".join(f"{e} {op} {b}" for e, op, b in self.terms) + ")"


class Overhang:
    """``t[key]`` with index expressions reaching past ``t``: usable only where a mask cuts
    it back inside (a masked ``nl.load`` / ``nl.store``); anywhere else it raises the index
    error it stands for."""

    __slots__ = ("error", "key", "shape", "tensor")

    def __init__(self, tensor, key: tuple, shape: tuple, error: Exception):
        self.tensor = tensor
        self.key = key
        self.shape = shape
        self.error = error

    @property
    def dtype(self) -> str:
        return self.tensor.dtype

    def __getattr__(self, name):  # any other use of the access: the index error it stands for
        raise object.__getattribute__(self, "error")

    def __getitem__(self, key):
        raise self.error

    def restrict(self, rect: dict[int, tuple[int, int]]):
        key = tuple(_restrict_expr(k, rect) if isinstance(k, IndexExpr) else k for k in self.key)
        view = index_view(self.tensor, key)
        if isinstance(view, Overhang):  # still past the tensor where the mask holds
            raise view.error
        return view

    def __repr__(self) -> str:
        return f"Overhang({self.tensor!r}, shape={self.shape})"


def _restrict_expr(e: IndexExpr, rect) -> IndexExpr:
    const, terms = e.const, dict(e.terms)
    for ax, (lo, hi) in rect.items():
        if ax in terms and terms[ax][1] > 1:
            c, _ = terms[ax]
            const += c * lo
            terms[ax] = (c, hi - lo)
    return IndexExpr(const, terms, e.ndim)


def check_mask(mask, what: str) -> Mask | None:
    """``mask`` as a Mask (None stays None), or a teaching error."""
    if mask is None or isinstance(mask, Mask):
        return mask
    raise KernelArgumentError(
        f"{what}: mask= takes a comparison of index expressions (e.g. mask=(i * 128 + i_p < n) "
        f"with i_p = nl.arange(128)[:, None]), not {mask!r}"
    )


def apply_mask(mask: Mask | None, what: str, *tensors):
    """The operands of a masked instruction cut to the mask's rectangle: dimension ``d`` of an
    operand is grid axis ``d`` (an operand of size 1 there is broadcast and kept whole).
    None when the mask keeps nothing: NKI then skips the instruction."""
    from ._tensor import NkiTensor

    if mask is None:
        return tensors
    rect = mask.rectangle(what)
    if rect is None:
        return None
    sizes = mask._sizes()
    for ax in rect:  # a cut must fall on an axis the instruction runs along
        if not any(
            (isinstance(t, Overhang) or type(t) is NkiTensor)
            and ax < len(t.shape)
            and t.shape[ax] == sizes[ax]
            for t in tensors
        ):
            raise KernelArgumentError(
                f"{what}: the mask cuts grid axis {ax} ({sizes[ax]} values), along which no "
                f"operand of the instruction runs; a mask addresses the instruction's own grid"
            )
    out = []
    for t in tensors:
        if isinstance(t, Overhang):
            out.append(t.restrict(rect))
            continue
        if type(t) is not NkiTensor or not rect:
            out.append(t)
            continue
        key = []
        for ax in range(t.ndim):
            n = t.shape[ax]
            if ax in rect and n != 1:
                if n != sizes[ax]:
                    raise KernelArgumentError(
                        f"{what}: operand {t} has {n} elements on axis {ax} where the mask's "
                        f"grid has {sizes[ax]}; a mask addresses the instruction's own grid"
                    )
                key.append(slice(*rect[ax]))
            else:
                key.append(slice(None))
        out.append(t[tuple(key)])
    return tuple(out)


def whole_grid_only(mask, what: str) -> None:
    """The rule for instructions that take a mask only where it holds on their whole grid
    (the older editions' tail guard on a loop without a tail)."""
    mask = check_mask(mask, what)
    if mask is None:
        return
    rect = mask.rectangle(what)
    if rect is None:
        raise NotModelledError(
            f"{what}: a mask that keeps no element (NKI skips the instruction) is not modelled "
            f"yet for it; leave the instruction out where the mask would be false"
        )
    if rect:
        raise NotModelledError(
            f"{what}: a mask that cuts the grid (predicated execution) is not modelled yet in "
            f"trnlab.nki; masks on nl.load, nl.store and the nl elementwise functions are"
        )


def give_masks(namespace: dict, prefix: str, names) -> None:
    """Older editions pass ``mask=`` to every API: each function of ``names`` without a mask
    parameter takes one that holds on its whole grid (:func:`whole_grid_only`)."""
    from . import _numerics as N

    for name in names:
        fn = namespace.get(name)
        if not callable(fn) or isinstance(fn, type):
            continue
        if "mask" in inspect.signature(fn).parameters:
            continue
        namespace[name] = _masked(f"{prefix}.{name}", fn)
        op = N._NAMES.get(id(fn))
        if op is not None:  # an operator passed as op=nl.max must still name "maximum"
            N.register(namespace[name], op)


def _masked(what: str, fn):
    @functools.wraps(fn)
    def api(*args, mask=None, **kwargs):
        if mask is not None:
            whole_grid_only(mask, what)
        return fn(*args, **kwargs)

    return api
