"""Tensors in HBM and tiles in SBUF / PSUM, and rectangular views of them.

A tile is 2-D: ``[partitions, free]``. Its size in SBUF is counted in bytes per partition
(free elements x the format's bits / 8), because SBUF is addressed along the free dimension of
each partition and a tile occupies the same byte range in every partition it uses
(NDOC NKI architecture guides: SBUF access rules).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["HBMTensor", "HBMView", "Tile", "View", "format_bits"]

# Storage bits of the formats, used only if trnlab.formats cannot answer (it is the authority).
_FALLBACK_BITS = {"fp32": 32.0, "tf32": 32.0, "bf16": 16.0, "fp16": 16.0, "int8": 8.0}


def format_bits(fmt: str) -> float:
    """Storage bits per element of ``fmt`` (MX formats include their share of the block scale)."""
    try:
        from trnlab import formats

        return float(formats.spec(fmt).bits_per_value)
    except ImportError:  # pragma: no cover - formats is part of the package
        if fmt in _FALLBACK_BITS:
            return _FALLBACK_BITS[fmt]
        raise


def _norm(key, shape: tuple[int, int], what: str) -> tuple[int, int, int, int]:
    """Normalise ``[a:b, c:d]`` (or ``[a:b]``) to (p0, p1, f0, f1) within ``shape``."""
    if type(key) is tuple and len(key) == 2:
        a, b = key
        if type(a) is slice and type(b) is slice and a.step is None and b.step is None:
            p0, p1, _ = a.indices(shape[0])
            f0, f1, _ = b.indices(shape[1])
            if p1 > p0 and f1 > f0:
                return p0, p1, f0, f1
    if not isinstance(key, tuple):
        key = (key, slice(None))
    if len(key) != 2:
        raise IndexError(f"{what} is 2-D [partition, free]; index it with two slices")
    out = []
    for k, n in zip(key, shape, strict=True):
        if isinstance(k, int | np.integer):
            k = slice(int(k), int(k) + 1)
        if not isinstance(k, slice) or k.step not in (None, 1):
            raise IndexError(f"{what}: use contiguous slices a:b, not {k!r}")
        a, b, _ = k.indices(n)
        if b <= a:
            raise IndexError(f"{what}: empty slice {k!r} of a dimension of size {n}")
        out += [a, b]
    return out[0], out[1], out[2], out[3]


class HBMTensor:
    """A 2-D tensor in device memory (HBM), in one format.

    Attributes
    ----------
    name : str
    shape : tuple of int
        ``(rows, cols)``. A DMA moves rows onto partitions.
    fmt : str
        Format of the stored values (``"bf16"``...).
    data : numpy.ndarray or None
        float32 values (already representable in ``fmt``); None in timing-only runs.
    """

    def __init__(self, tid: int, name: str, shape, fmt: str, data, written: bool):
        self.id = tid
        self.name = name
        self.shape = (int(shape[0]), int(shape[1]))
        self.fmt = fmt
        self.data = data
        self.written = written
        self.bits = format_bits(fmt)

    def __getitem__(self, key) -> HBMView:
        return HBMView(self, *_norm(key, self.shape, f"HBM tensor {self.name!r}"))

    @property
    def full(self) -> HBMView:
        return HBMView(self, 0, self.shape[0], 0, self.shape[1])

    def __repr__(self) -> str:
        return f"HBMTensor({self.name!r}, {self.shape}, {self.fmt})"


@dataclass(frozen=True)
class HBMView:
    """Rows ``r0:r1`` and columns ``c0:c1`` of an HBM tensor."""

    tensor: HBMTensor
    r0: int
    r1: int
    c0: int
    c1: int

    @property
    def shape(self) -> tuple[int, int]:
        return (self.r1 - self.r0, self.c1 - self.c0)


class Tile:
    """A tile in SBUF or PSUM: ``[partitions, free]`` elements of one format.

    Created by :meth:`KernelContext.sbuf` / :meth:`KernelContext.psum`; index it to get a view
    (``tile[:k, :n]``). ``offset`` is the byte offset in each partition (SBUF) or the bank
    number (PSUM).
    """

    def __init__(self, tid, name, space, shape, fmt, offset, bytes_pp, numerics):
        self.id = tid
        self.name = name
        self.space = space
        self.shape = (int(shape[0]), int(shape[1]))
        self.fmt = fmt
        self.offset = offset
        self.bytes_per_partition = bytes_pp
        self.bits = format_bits(fmt)
        self.data = np.zeros(self.shape, np.float32) if numerics else None
        self.written_mask = np.zeros(self.shape, bool)
        self.fully_written = False
        self.freed = False
        # Dependency bookkeeping: (p0, p1, f0, f1, instruction, engine) of recent accesses.
        self.writes: list[tuple[int, int, int, int, int, int]] = []
        self.reads: list[tuple[int, int, int, int, int, int]] = []
        # Last accesses of freed tiles whose memory this one reuses (waited for on first use).
        self.inherited: list[int] = []
        self.span = (0, 0)

    def __getitem__(self, key) -> View:
        return View(self, *_norm(key, self.shape, f"tile {self.name!r}"))

    @property
    def full(self) -> View:
        return View(self, 0, self.shape[0], 0, self.shape[1])

    def __repr__(self) -> str:
        where = f"bank {self.offset}" if self.space == "psum" else f"@{self.offset} B"
        return f"Tile({self.name!r}, {self.space} {self.shape} {self.fmt}, {where})"


@dataclass(frozen=True)
class View:
    """Partitions ``p0:p1`` and free elements ``f0:f1`` of a tile."""

    tile: Tile
    p0: int
    p1: int
    f0: int
    f1: int

    @property
    def shape(self) -> tuple[int, int]:
        return (self.p1 - self.p0, self.f1 - self.f0)

    @property
    def partitions(self) -> int:
        return self.p1 - self.p0

    @property
    def free(self) -> int:
        return self.f1 - self.f0

    @property
    def region(self) -> tuple[int, int, int, int]:
        return (self.p0, self.p1, self.f0, self.f1)

    @property
    def bytes_per_partition(self) -> int:
        return math.ceil(self.free * self.tile.bits / 8)

    def get(self) -> np.ndarray:
        return self.tile.data[self.p0 : self.p1, self.f0 : self.f1]

    def set(self, values: np.ndarray) -> None:
        self.tile.data[self.p0 : self.p1, self.f0 : self.f1] = values
