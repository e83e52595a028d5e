"""Placing an SPMD grid on the NeuronCores of a logical core (older NKI editions).

``kernel[nl.spmd_dim(4, nl.nc(2)), 2]`` launches a 8 x 2 grid whose first axis is split over
the two physical NeuronCores of an LNC=2 logical core: index ``i`` of that axis is the digits
``(i // 2, i % 2)`` of the sizes ``(4, 2)``, and the ``nl.nc`` digit names the core. So
``spmd_dim(nc(2), 2)`` gives core 0 the indices 0 and 1, ``spmd_dim(2, nc(2))`` the even
ones (the API examples' two placements); ``nc(2) * 2`` and ``2 * nc(2)`` are the same two.
Each core runs its programs one after another, the two cores at the same time.
"""

from __future__ import annotations

import itertools
import math
import numbers

from trnlab.core import KernelArgumentError

__all__ = ["NcDim", "SpmdDim", "nc", "placement", "spmd_dim"]


def _size(x, what: str) -> int:
    if isinstance(x, bool) or not isinstance(x, numbers.Integral) or x < 1:
        raise KernelArgumentError(f"{what} must be a positive whole number, not {x!r}")
    return int(x)


class _Factor:
    """A launch-grid factor: ``a * b`` of factors and whole numbers is their spmd_dim."""

    __slots__ = ()

    def __mul__(self, k) -> SpmdDim:
        return spmd_dim(self, k)

    def __rmul__(self, k) -> SpmdDim:
        return spmd_dim(k, self)


class NcDim(_Factor):
    """``nl.nc(n)``: ``n`` physical NeuronCores of a logical core, as a launch-grid factor."""

    __slots__ = ("n",)

    def __init__(self, n: int):
        self.n = n

    def __repr__(self) -> str:
        return f"nl.nc({self.n})"


class SpmdDim(_Factor):
    """``nl.spmd_dim(...)``: one launch-grid axis of the product of its parts' sizes."""

    __slots__ = ("parts",)

    def __init__(self, parts: tuple):
        self.parts = parts

    @property
    def size(self) -> int:
        return math.prod(p.n if isinstance(p, NcDim) else p for p in self.parts)

    def core_of(self, i: int) -> int:
        """The core of index ``i`` along this axis (the ``nl.nc`` digit of ``i``)."""
        for p in reversed(self.parts):
            n = p.n if isinstance(p, NcDim) else p
            i, digit = divmod(i, n)
            if isinstance(p, NcDim):
                return digit
        return 0

    def __repr__(self) -> str:
        return f"nl.spmd_dim({', '.join(map(repr, self.parts))})"


def nc(n) -> NcDim:
    """``nl.nc(n)``: the physical NeuronCores of a logical one (LNC=2: ``nl.nc(2)``)."""
    n = _size(n, "nl.nc(n)")
    if n > 2:
        raise KernelArgumentError(
            f"nl.nc({n}): a logical NeuronCore has at most 2 physical cores (LNC=2 on "
            f"Trainium2 and Trainium3); use nl.nc(2)"
        )
    return NcDim(n)


def spmd_dim(*parts) -> SpmdDim:
    """``nl.spmd_dim(a, nl.nc(2))``: a launch-grid axis of size ``a * 2`` whose ``nl.nc``
    factor places its indices on the physical cores (see the module docstring)."""
    out = []
    for p in parts:
        if isinstance(p, SpmdDim):
            out.extend(p.parts)
        elif isinstance(p, NcDim):
            out.append(p)
        else:
            out.append(_size(p, "an nl.spmd_dim factor"))
    if sum(isinstance(p, NcDim) for p in out) != 1:
        raise KernelArgumentError(
            f"nl.spmd_dim{tuple(parts)!r} takes exactly one nl.nc(...) among its factors (the "
            f"cores to split that axis over) and whole numbers"
        )
    return SpmdDim(tuple(out))


def is_placed(d) -> bool:
    return isinstance(d, NcDim | SpmdDim)


def placement(dims: tuple) -> tuple[tuple[int, ...], int, list[list[tuple[int, ...]]]]:
    """``(grid, cores, programs per core)`` of a launch grid holding one ``nl.nc`` factor."""
    placed = [i for i, d in enumerate(dims) if is_placed(d)]
    if len(placed) != 1:
        raise KernelArgumentError(
            "a launch grid places one axis on the cores: give one nl.nc / nl.spmd_dim axis"
        )
    (axis,) = placed
    d = dims[axis]
    d = d if isinstance(d, SpmdDim) else SpmdDim((d,))
    n = next(p.n for p in d.parts if isinstance(p, NcDim))
    grid = tuple(
        d.size if i == axis else _size(x, "a launch-grid size") for i, x in enumerate(dims)
    )
    programs: list[list[tuple[int, ...]]] = [[] for _ in range(n)]
    for pid in itertools.product(*(range(g) for g in grid)):
        programs[d.core_of(pid[axis])].append(pid)
    return grid, n, programs
