"""Tensors in HBM and tiles in SBUF / PSUM, rectangular views of them, and rotating buffers.

A tile is 2-D: ``[partitions, free]``. Its size in SBUF is counted in bytes per partition
(free elements x the format's bits / 8), because SBUF is addressed along the free dimension of
each partition and a tile occupies the same byte range in every partition it uses
(NDOC NKI architecture guides: SBUF access rules).

A :class:`TilePool` is a tile with N rotating buffers, what the NKI compiler gives a tile that a
kernel declares inside an ``affine_range`` loop body: each ``pool.next()`` hands out the next
buffer, so iteration i + 1 can load its data while iteration i still computes on its own copy.
Every buffer occupies SBUF (or PSUM) for the whole pool's life.

Views are small ``__slots__`` objects (a kernel makes one or two per instruction, so they are
on the recording's hot path); their ``region`` is ``(p0, p1, f0, f1)``.
"""

from __future__ import annotations

import math

import numpy as np

from ._errors import KernelArgumentError, TileIndexError
from ._stored import StoredRegions

__all__ = [
    "STORAGE_TYPES",
    "HBMTensor",
    "HBMView",
    "Tile",
    "TilePool",
    "View",
    "format_bits",
    "format_name",
]

# Storage bits of the formats, used only if trnlab.formats cannot answer (it is the authority).
_FALLBACK_BITS = {"fp32": 32.0, "tf32": 32.0, "bf16": 16.0, "fp16": 16.0, "int8": 8.0}
#: Storage types of NKI tensors that are not numeric formats of trnlab.formats: plain integers
#: (bool_ is a byte) and NKI's x4-packed MX types (four fp8 values in 32 bits, four fp4 in 16;
#: the block scales live in a tile of their own). Name -> (bits per element, Tensor Engine data
#: type or None).
STORAGE_TYPES: dict[str, tuple[float, str | None]] = {
    "bool": (8.0, None),
    "uint8": (8.0, None),
    "int16": (16.0, None),
    "uint16": (16.0, None),
    "int32": (32.0, None),
    "uint32": (32.0, None),
    "mxfp8_e4m3_x4": (32.0, "mxfp8"),
    "mxfp8_e5m2_x4": (32.0, "mxfp8"),
    "mxfp4_x4": (16.0, "mxfp4"),
}
_BITS: dict[str, float] = {k: v[0] for k, v in STORAGE_TYPES.items()}
_NAMES: dict[str, str] = {k: k for k in STORAGE_TYPES}


def format_name(fmt: str) -> str:
    """trnlab.formats' name of ``fmt`` (``"BF16"``, ``"bfloat16"`` -> ``"bf16"``; a storage
    type of :data:`STORAGE_TYPES` as it is); an unknown name raises with the nearest names."""
    name = _NAMES.get(fmt) if isinstance(fmt, str) else None
    if name is None:
        from trnlab import formats

        name = _NAMES[fmt] = formats.spec(fmt).name
    return name


def format_bits(fmt: str) -> float:
    """Storage bits per element of ``fmt`` (MX formats include their share of the block scale;
    :data:`STORAGE_TYPES` names NKI's plain integers and x4-packed MX elements)."""
    b = _BITS.get(fmt) if isinstance(fmt, str) else None
    if b is not None:
        return b
    if not isinstance(fmt, str):
        raise KernelArgumentError(f"a format is named by a string such as 'bf16', not {fmt!r}")
    try:
        from trnlab import formats

        b = float(formats.spec(fmt).bits_per_value)
    except ImportError:  # pragma: no cover - formats is part of the package
        if fmt not in _FALLBACK_BITS:
            raise
        b = _FALLBACK_BITS[fmt]
    _BITS[fmt] = b
    return b


#: Output tensors of up to this many elements answer "was this region stored?" from an element
#: mask (one byte per element, built the first time a kernel reads back many stores); bigger
#: ones from a grid of cells shaped like their stores.
STORE_MASK_LIMIT = 2**27
_SCAN_STORES = 16  # store regions scanned before the mask pays for itself


def _bad_index(key, shape, what: str) -> tuple[int, int, int, int]:
    """The slow path of :func:`_slice`: integers, open slices, and the errors that teach."""
    if not isinstance(key, tuple):
        key = (key, slice(None))
    if len(key) != 2:
        raise TileIndexError(
            f"{what} is 2-D [partition, free]; index it with two slices, e.g. t[0:128, 0:512]"
        )
    out = []
    for k, n, axis in zip(key, shape, ("partition", "free"), strict=True):
        if isinstance(k, bool) or not isinstance(k, int | np.integer | slice):
            raise TileIndexError(
                f"{what}: index the {axis} dimension with an integer or a slice a:b, "
                f"not {type(k).__name__} {k!r}"
            )
        if isinstance(k, int | np.integer):
            i = int(k)
            if not -n <= i < n:
                raise TileIndexError(f"{what}: {axis} index {i} is outside 0..{n - 1}")
            i %= n
            k = slice(i, i + 1)
        if k.step not in (None, 1):
            raise TileIndexError(f"{what}: use contiguous slices a:b (step 1), not {k!r}")
        for bound in (k.start, k.stop):
            if bound is None:
                continue
            if isinstance(bound, bool) or not isinstance(bound, int | np.integer):
                raise TileIndexError(
                    f"{what}: slice {k.start}:{k.stop} of the {axis} dimension has a bound that "
                    f"is not a whole number ({bound!r}); slice with integers a:b."
                )
            if not -n <= int(bound) <= n:
                raise TileIndexError(
                    f"{what}: slice {k.start}:{k.stop} of the {axis} dimension reaches outside "
                    f"its size {n}; trnlab does not clip slices (NumPy would, silently)."
                )
        a, b, _ = k.indices(n)
        if b <= a:
            raise TileIndexError(f"{what}: empty slice {k!r} of the {axis} dimension (size {n})")
        out += [a, b]
    return out[0], out[1], out[2], out[3]


def _slice(owner, key):
    """``owner[a:b, c:d]`` (or ``[a:b]``, integers) for a tile or an HBM tensor: the view of
    rows / partitions a:b and columns / free elements c:d, inside its shape. The common case
    (two plain slices with whole-number bounds) is checked inline, each bound read once, since
    a kernel slices on nearly every instruction; anything else, and every error, goes through
    :func:`_bad_index`. An HBM view is made without calling :class:`HBMView` (its
    ``__init__``, inline): a Python constructor call costs a tenth of a slice."""
    p0 = None
    if type(key) is tuple and len(key) == 2:
        a, b = key
        if type(a) is slice and type(b) is slice and a.step is None and b.step is None:
            R, C = owner.shape
            p0, p1, f0, f1 = a.start, a.stop, b.start, b.stop
            if p0 is None:
                p0 = 0
            if p1 is None:
                p1 = R
            if f0 is None:
                f0 = 0
            if f1 is None:
                f1 = C
            if not (
                type(p0) is int
                and type(p1) is int
                and type(f0) is int
                and type(f1) is int
                and 0 <= p0 < p1 <= R
                and 0 <= f0 < f1 <= C
            ):
                p0 = None
    if type(owner) is HBMTensor:
        if p0 is None:
            p0, p1, f0, f1 = _bad_index(key, owner.shape, f"HBM tensor {owner.name!r}")
        v = _new(HBMView)
        v.tensor = owner
        v.r0 = p0
        v.r1 = p1
        v.c0 = f0
        v.c1 = f1
        return v
    if p0 is None:
        p0, p1, f0, f1 = _bad_index(key, owner.shape, f"tile {owner.name!r}")
    return View(owner, p0, p1, f0, f1)


_new = object.__new__


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
    written : bool
        Holds an input (False: an output, which the kernel must store before reading it).
    """

    def __init__(self, tid: int, name: str, shape, fmt: str, data, written: bool):
        self.id = tid
        self.name = name
        self.shape = (int(shape[0]), int(shape[1]))
        self.fmt = fmt
        self.data = data
        self.written = written
        self.bits = format_bits(fmt)
        #: store regions not yet painted into the mask (outputs only; appended by every store)
        self.pending_stores: list[tuple[int, int, int, int]] = []
        self._stored: StoredRegions | None = None  # the stores' grid (built on demand)
        self.full = HBMView(self, 0, self.shape[0], 0, self.shape[1])  # a view never changes

    def note_store(self, r0: int, r1: int, c0: int, c1: int) -> None:
        """Remember that a store (or HBM copy) wrote rows ``r0:r1``, columns ``c0:c1``."""
        self.pending_stores.append((r0, r1, c0, c1))

    def overlaps_store(self, r0: int, r1: int, c0: int, c1: int) -> bool:
        """Whether any store so far wrote part of rows ``r0:r1``, columns ``c0:c1``: an output
        counts as written where a store overlapped, not only where stores cover it exactly.

        A few stores are scanned; past that, each store region is painted once into a grid
        (:class:`~trnlab.core._stored.StoredRegions`: an element mask for tensors of up to
        ``STORE_MASK_LIMIT`` elements) that later reads consult, so a read costs the cells it
        touches, not every store so far."""
        pending = self.pending_stores
        if self._stored is None:
            if len(pending) <= _SCAN_STORES:
                return any(a < r1 and r0 < b and c < c1 and c0 < d for a, b, c, d in pending)
            self._stored = StoredRegions(self.shape, pending, STORE_MASK_LIMIT)
        stored = self._stored
        for region in pending:
            stored.add(*region)
        pending.clear()
        return stored.overlaps(r0, r1, c0, c1)

    __getitem__ = _slice  # -> HBMView

    def __repr__(self) -> str:
        return f"HBMTensor({self.name!r}, {self.shape}, {self.fmt})"


class HBMView:
    """Rows ``r0:r1`` and columns ``c0:c1`` of an HBM tensor."""

    __slots__ = ("c0", "c1", "r0", "r1", "tensor")

    def __init__(self, tensor: HBMTensor, r0: int, r1: int, c0: int, c1: int):
        self.tensor = tensor  # _slice, the hot path, sets these five inline
        self.r0 = r0
        self.r1 = r1
        self.c0 = c0
        self.c1 = c1

    @property
    def shape(self) -> tuple[int, int]:
        return (self.r1 - self.r0, self.c1 - self.c0)

    @property
    def region(self) -> tuple[int, int, int, int]:
        return (self.r0, self.r1, self.c0, self.c1)

    def __eq__(self, other) -> bool:
        return isinstance(other, HBMView) and (self.tensor, *self.region) == (
            other.tensor,
            *other.region,
        )

    def __hash__(self) -> int:
        return hash((id(self.tensor), self.r0, self.r1, self.c0, self.c1))

    def __repr__(self) -> str:
        return f"{self.tensor.name}[{self.r0}:{self.r1}, {self.c0}:{self.c1}]"


class Tile:
    """A tile in SBUF or PSUM: ``[partitions, free]`` elements of one format.

    Created by :meth:`KernelContext.sbuf` / :meth:`KernelContext.psum` (or handed out by a
    :class:`TilePool`); index it to get a view (``tile[:k, :n]``). ``offset`` is the byte
    offset in each partition (SBUF) or the first bank (PSUM); ``pool`` and ``buffer`` name the
    rotating buffer it is, if any.
    """

    def __init__(self, tid, name, space, shape, fmt, offset, bytes_pp, numerics, fmt_id=0):
        self.id = tid
        self.name = name
        self.space = space
        self.shape = (int(shape[0]), int(shape[1]))
        self.fmt = fmt
        self.fmt_id = fmt_id
        self.offset = offset
        self.bytes_per_partition = bytes_pp
        self.bits = format_bits(fmt)
        self.data = np.full(self.shape, np.nan, np.float32) if numerics else None
        self.written_mask = np.zeros(self.shape, bool)
        self.n_written = 0  # elements of written_mask set
        self.fully_written = False
        self.freed = False
        self.version = 0  # writes so far (a stationary tile written again must be reloaded)
        self.pool: str | None = None
        self.buffer = 0
        self.full = View(self, 0, self.shape[0], 0, self.shape[1])

    __getitem__ = _slice  # -> View

    def mark_written(self, region) -> None:
        """Record that ``region`` now holds values (reads of unwritten regions are refused)."""
        if not self.fully_written:
            p0, p1, f0, f1 = region
            if p0 == 0 and f0 == 0 and p1 == self.shape[0] and f1 == self.shape[1]:
                self.fully_written = True
                return
            part = self.written_mask[p0:p1, f0:f1]
            # count what this write adds (its own region's cost, not the tile's)
            self.n_written += part.size - int(np.count_nonzero(part))
            part[...] = True
            self.fully_written = self.n_written == self.shape[0] * self.shape[1]

    def is_written(self, region) -> bool:
        if self.fully_written:
            return True
        p0, p1, f0, f1 = region
        return bool(self.written_mask[p0:p1, f0:f1].all())

    def __repr__(self) -> str:
        where = f"bank {self.offset}" if self.space == "psum" else f"@{self.offset} B"
        return f"Tile({self.name!r}, {self.space} {self.shape} {self.fmt}, {where})"


class View:
    """Partitions ``p0:p1`` and free elements ``f0:f1`` of a tile. ``key`` packs the region
    into one integer (what an instruction row records: p0, p1 in 8 bits each, f0, f1 in 24)."""

    __slots__ = ("f0", "f1", "key", "p0", "p1", "region", "tile")

    def __init__(self, tile: Tile, p0: int, p1: int, f0: int, f1: int):
        self.tile = tile
        self.p0 = p0
        self.p1 = p1
        self.f0 = f0
        self.f1 = f1
        self.region = (p0, p1, f0, f1)
        self.key = p0 | p1 << 8 | f0 << 16 | f1 << 40

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
    def bytes_per_partition(self) -> int:
        return math.ceil(self.free * self.tile.bits / 8)

    def get(self) -> np.ndarray:
        return self.tile.data[self.p0 : self.p1, self.f0 : self.f1]

    def set(self, values: np.ndarray) -> None:
        self.tile.data[self.p0 : self.p1, self.f0 : self.f1] = values

    def __eq__(self, other) -> bool:
        return isinstance(other, View) and self.tile is other.tile and self.region == other.region

    def __hash__(self) -> int:
        return hash((id(self.tile), self.region))

    def __repr__(self) -> str:
        return f"{self.tile.name}[{self.p0}:{self.p1}, {self.f0}:{self.f1}]"


class TilePool:
    """A tile with ``bufs`` rotating buffers (``ctx.sbuf(shape, fmt, bufs=3)``).

    ``pool.next()`` returns the next buffer (a :class:`Tile`), cycling through them; the
    buffer a write lands in waits only for the readers of *that* buffer, so a loop that takes
    a fresh buffer each iteration overlaps its iterations, as the NKI compiler's rotating
    buffers for tiles declared in an ``affine_range`` body do. ``pool[i]`` is buffer ``i``.
    """

    def __init__(self, name: str, buffers: list[Tile]):
        self.name = name
        self.buffers = buffers
        self._next = 0
        for i, t in enumerate(buffers):
            t.pool = name
            t.buffer = i

    @property
    def bufs(self) -> int:
        return len(self.buffers)

    @property
    def shape(self) -> tuple[int, int]:
        return self.buffers[0].shape

    @property
    def fmt(self) -> str:
        return self.buffers[0].fmt

    @property
    def space(self) -> str:
        return self.buffers[0].space

    def next(self) -> Tile:
        """The next buffer in rotation."""
        t = self.buffers[self._next]
        self._next = (self._next + 1) % len(self.buffers)
        return t

    def __getitem__(self, i: int) -> Tile:
        n = len(self.buffers)
        if isinstance(i, bool) or not isinstance(i, int | np.integer) or not -n <= i < n:
            raise TileIndexError(
                f"pool {self.name!r} has buffers 0..{n - 1}; pool[{i!r}] is not one of them"
            )
        return self.buffers[i]

    def __len__(self) -> int:
        return len(self.buffers)

    def __iter__(self):
        return iter(self.buffers)

    def __repr__(self) -> str:
        t = self.buffers[0]
        return f"TilePool({self.name!r}, {t.space} {t.shape} {t.fmt}, bufs={len(self.buffers)})"
