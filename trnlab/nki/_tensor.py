"""NKI tensors: storage in HBM, SBUF or PSUM, and strided views of it (``NkiTensor``).

A tensor is NKI's pair of a *storage* (shape, dtype, memory) and a *view* on it: element
``(i0, i1, ...)`` of the view is element ``offset + sum(strides[k] * i_k)`` of the storage,
in row-major order of the storage's shape. Indexing, ``reshape``, ``permute``, ``broadcast``,
``ap`` ... make new views of the same storage, as the NKI language guide describes.

How a view maps onto trnlab's engine model (``trnlab.core``, whose tiles are 2-D):

- An SBUF or PSUM storage of shape ``(P, d1, d2, ...)`` is one tile ``[P, d1 * d2 * ...]``:
  partitions first, the free dimensions flattened. A view used by an instruction must cover a
  contiguous range of partitions (partition stride = the storage's free size); its free access
  may be strided (every other element, a broadcast, a 5-D ``ap`` window): the instruction is
  recorded with the bounding range of free offsets (so no dependency is missed) and charged for
  the elements it actually streams.
- An HBM storage of shape ``(d0, ..., dn)`` is a 2-D tensor ``[d0 * ... * d(n-1), dn]`` (all
  but the last dimension flattened into rows). A DMA's HBM view is recorded as its rectangle
  of that (a run of whole rows, or of rows sliced to the same columns) or, for any other
  access pattern (strided rows, permuted dimensions), as the bounding rows it touches, with
  the bytes it actually moves.

The numerics are computed on numpy arrays of each storage's own N-D shape.
"""

from __future__ import annotations

import math
import numbers
from enum import Enum

import numpy as np

from trnlab.core import KernelArgumentError, TileIndexError

from ._dtypes import DType
from ._errors import NotModelledError

__all__ = ["MemoryRegion", "NkiTensor", "Storage"]


class MemoryRegion(Enum):
    """Where a tensor lives (``nl.sbuf``, ``nl.psum``, ``nl.hbm``/``nl.private_hbm``,
    ``nl.shared_hbm``)."""

    sbuf = "sbuf"
    psum = "psum"
    private_hbm = "private_hbm"
    shared_hbm = "shared_hbm"

    def __repr__(self) -> str:
        return f"nl.{self.name}"


def _row_major(shape) -> tuple[int, ...]:
    out = []
    acc = 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


class Storage:
    """The memory behind a tensor: one SBUF/PSUM allocation or one HBM tensor.

    ``data`` holds the values (float32, the storage's shape, plus a trailing axis of 4 for
    x4-packed types) or None in a timing-only run. ``first``/``last`` are the first and last
    recorded instructions touching it (the liveness the buffer allocator reads), ``site`` the
    place in the kernel's source that declared it, ``core`` its HBM tensor in the engine model.
    """

    __slots__ = (
        "__weakref__",
        "buffer",
        "cols",
        "core",
        "data",
        "dtype",
        "first",
        "free",
        "frozen",
        "id",
        "input",
        "last",
        "mask",
        "name",
        "raw",
        "rows",
        "shape",
        "site",
        "stored",
    )

    def __init__(self, sid, buffer: MemoryRegion, shape, dtype: DType, name: str, data=None):
        self.id = sid
        self.buffer = buffer
        self.shape = shape
        self.dtype = dtype
        self.name = name
        self.data = data
        self.first = -1
        self.last = -1
        self.site = None
        self.core = None
        self.input = False
        self.raw = None  # an input's own numpy array (its bits, for a reinterpreting read)
        self.frozen: str | None = None  # why the kernel may not write it (a reinterpreted input)
        self.stored = False
        self.mask = None  # PSUM: regions written since allocation (matmul accumulate=None)
        n = 1
        for d in shape[1:]:
            n *= d
        self.free = n
        self.rows = shape[0] * n // shape[-1] if len(shape) > 1 else 1
        self.cols = shape[-1]

    @property
    def on_chip(self) -> bool:
        return self.buffer is MemoryRegion.sbuf or self.buffer is MemoryRegion.psum

    def __repr__(self) -> str:
        return f"Storage({self.name!r}, {self.buffer.name} {self.shape} {self.dtype.name})"


def _index_error(msg: str) -> IndexError:
    """trnlab.core's TileIndexError (a teaching error that is also an ``IndexError``, as NKI's)."""
    return TileIndexError(msg + " (trnlab does not clip indices, as NumPy would silently)")


def _merged(shape, strides) -> list[list[int]]:
    """``[size, stride]`` of a view's dimensions with the size-1 ones dropped and each merged
    into the one before it when the two lie back to back in memory."""
    merged: list[list[int]] = []
    for n, st in zip(shape, strides, strict=True):
        if n == 1:
            continue
        if merged and merged[-1][1] == st * n:
            merged[-1] = [merged[-1][0] * n, st]
        else:
            merged.append([n, st])
    return merged


class NkiTensor:
    """An NKI tensor: a view (shape, strides, offset) of a storage in HBM, SBUF or PSUM.

    Attributes mirror NKI's: ``shape``, ``strides``, ``offset``, ``dtype``, ``buffer``,
    ``ndim``, ``size``, ``name``. Views share storage; taking one costs nothing at run time.
    """

    # ``_keep`` (set only by integer indexing that leaves an HBM view 1-D): where the last
    # dimension an integer dropped was, so the tile ``nl.load`` makes of it stays 2-D there.
    __slots__ = ("_keep", "_s", "offset", "shape", "strides")

    def __init__(self, storage: Storage, shape=None, strides=None, offset: int = 0):
        self._s = storage
        self.shape = storage.shape if shape is None else shape
        self.strides = _row_major(self.shape) if strides is None else strides
        self.offset = offset

    # --- attributes ---------------------------------------------------------------------------
    @property
    def dtype(self) -> str:
        return self._s.dtype.name

    @property
    def buffer(self) -> MemoryRegion:
        return self._s.buffer

    @property
    def name(self) -> str:
        return self._s.name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"NkiTensor({self.name!r}, {self.buffer!r}, shape={self.shape}, dtype={self.dtype})"

    def __bool__(self):
        if not self._s.on_chip:  # `if bias:` on a kernel argument: an optional input was given
            return True
        raise TypeError(
            "an NKI tensor has no truth value while the kernel is traced (its values exist only "
            "at run time); compare shapes or use nl.equal / nisa.affine_select on the device"
        )

    # --- indexing -----------------------------------------------------------------------------
    def __getitem__(self, key) -> NkiTensor:
        if type(key) is not tuple:  # an nl.mgrid Grid indexes with all of its expressions
            key = tuple(key) if isinstance(key, tuple) else (key,)
        shape, strides = self.shape, self.strides
        # Fastest path: two plain slices of a 2-D tensor (tiles and HBM blocks).
        if len(key) == 2 and len(shape) == 2:
            ka, kb = key
            if type(ka) is slice and type(kb) is slice and ka.step is None and kb.step is None:
                n0, n1 = shape
                a0 = 0 if ka.start is None else ka.start
                a1 = n0 if ka.stop is None else ka.stop
                b0 = 0 if kb.start is None else kb.start
                b1 = n1 if kb.stop is None else kb.stop
                if (
                    type(a0) is int
                    and type(a1) is int
                    and type(b0) is int
                    and type(b1) is int
                    and 0 <= a0 < a1 <= n0
                    and 0 <= b0 < b1 <= n1
                ):
                    return NkiTensor(
                        self._s,
                        (a1 - a0, b1 - b0),
                        strides,
                        self.offset + a0 * strides[0] + b0 * strides[1],
                    )
        # Fast path: a slice per dimension, no steps.
        if len(key) == len(shape):
            off = self.offset
            fast = True
            new_shape = []
            for k, n, s in zip(key, shape, strides, strict=True):
                if type(k) is not slice or k.step is not None:
                    fast = False
                    break
                a = 0 if k.start is None else k.start
                b = n if k.stop is None else k.stop
                if type(a) is not int or type(b) is not int or not 0 <= a < b <= n:
                    fast = False
                    break
                off += a * s
                new_shape.append(b - a)
            if fast:
                view = NkiTensor(self._s, tuple(new_shape), strides, off)
                if len(new_shape) == 1 and (keep := getattr(self, "_keep", None)) is not None:
                    view._keep = keep  # a slice of a column is a column
                return view
        return self._index(key)

    def _index(self, key) -> NkiTensor:
        from ._index import IndexExpr, index_view

        if key and type(key[0]) is NkiTensor:  # rows chosen by a tile's values
            from ._indirect import IndirectView

            return IndirectView(self, key[0], key[1:])
        if any(type(k) is IndexExpr for k in key):  # nl.arange / nl.mgrid (older editions)
            return index_view(self, key)
        on_chip = self._s.on_chip
        n_real = sum(1 for k in key if k is not Ellipsis and k is not None)
        if sum(1 for k in key if k is Ellipsis) > 1:
            raise _index_error("an index can hold at most one Ellipsis (...)")
        if n_real > self.ndim:
            raise _index_error(f"too many indices ({n_real}) for a {self.ndim}-D tensor {self}")
        full = []
        for k in key:
            if k is Ellipsis:
                full.extend([slice(None)] * (self.ndim - n_real))
            elif k is None:
                raise NotModelledError(
                    "indexing with None (np.newaxis) is not modelled; use t.expand_dim(dim)"
                )
            else:
                full.append(k)
        full.extend([slice(None)] * (self.ndim - len(full)))
        off = self.offset
        shape, strides, dropped = [], [], []
        for dim, (k, n, s) in enumerate(zip(full, self.shape, self.strides, strict=True)):
            if isinstance(k, numbers.Integral) and not isinstance(k, bool):
                i = int(k)
                if not -n <= i < n:
                    raise _index_error(f"index {i} is outside 0..{n - 1} of dim {dim} of {self}")
                off += (i % n) * s
                if on_chip and dim == 0 and s >= self._s.free:  # partitions, not a block
                    shape.append(1)
                    strides.append(s)
                else:
                    dropped.append((len(shape), s))
                continue
            if type(k) is slice:
                step = 1 if k.step is None else k.step
                if not isinstance(step, numbers.Integral) or step < 1:
                    raise _index_error(f"slice step must be a positive integer, not {k.step!r}")
                for b in (k.start, k.stop):
                    if b is not None and not isinstance(b, numbers.Integral):
                        raise NotModelledError(
                            f"a slice bound of {type(b).__name__} ({b!r}): trnlab.nki models "
                            f"bounds known when the kernel is traced (Python integers, nl.ds)"
                        )
                    if b is not None and not -n <= int(b) <= n:
                        raise _index_error(
                            f"slice {k.start}:{k.stop} reaches outside dim {dim} (size {n}) "
                            f"of {self}"
                        )
                a, b, _ = slice(k.start, k.stop).indices(n)
                if b <= a:
                    raise _index_error(f"empty slice {k.start}:{k.stop} of dim {dim} of {self}")
                off += a * s
                shape.append(-(-(b - a) // step))
                strides.append(s * step)
                continue
            raise NotModelledError(
                f"indexing with {type(k).__name__} is not modelled yet in trnlab.nki; index with "
                f"integers, slices a:b:c, ..., nl.ds(start, size) or affine nl.arange / "
                f"nl.mgrid expressions (dynamic and index-array indexing are not modelled)"
            )
        if not shape or (on_chip and len(shape) < 2):
            pos, s = dropped[-1]
            shape.insert(pos, 1)
            strides.insert(pos, s)
        view = NkiTensor(self._s, tuple(shape), tuple(strides), off)
        if len(shape) == 1 and dropped:
            view._keep = dropped[-1][0]
        return view

    def __setitem__(self, key, value) -> None:
        from . import language as nl

        view = self[key]
        if (
            type(value) is NkiTensor
            and value._s is view._s
            and value.shape == view.shape
            and value.strides == view.strides
            and value.offset == view.offset
        ):
            return  # `t[i] += x` updated t[i] in place; the assignment back is the same view
        nl._assign(view, value)

    # --- views --------------------------------------------------------------------------------
    def _view(self, shape, strides, offset=None) -> NkiTensor:
        return NkiTensor(
            self._s, tuple(shape), tuple(strides), self.offset if offset is None else offset
        )

    def _check_dim(self, dim: int, what: str) -> int:
        if not isinstance(dim, numbers.Integral) or not -self.ndim <= dim < self.ndim:
            raise KernelArgumentError(f"{what}: dim {dim!r} is not a dimension of {self}")
        dim = int(dim) % self.ndim
        return dim

    def _no_partition(self, dim: int, what: str) -> None:
        if self._s.on_chip and dim == 0:
            raise KernelArgumentError(
                f"{what} on dim 0 of {self}: on-chip tensors keep their partition dimension; "
                f"moving data across partitions needs an instruction (a transpose, a matmul)"
            )

    def is_contiguous(self) -> bool:
        """True when the view covers its storage densely in row-major order (the partition
        dimension of an on-chip tensor is skipped, as in NKI)."""
        start = 1 if self._s.on_chip else 0
        expect = 1
        for n, s in zip(reversed(self.shape[start:]), reversed(self.strides[start:]), strict=True):
            if n != 1 and s != expect:
                return False
            expect *= n
        return True

    def get_pattern(self) -> list[list[int]]:
        """The view as ``[[stride, count], ...]`` (what :meth:`ap` takes)."""
        return [[s, n] for s, n in zip(self.strides, self.shape, strict=True)]

    def is_indirect(self) -> bool:
        """Always False: dynamic (indirect) views are not modelled."""
        return False

    def reshape(self, shape) -> NkiTensor:
        """A view with a new shape (same elements, row-major); the view must be contiguous."""
        shape = tuple(int(x) for x in (shape if isinstance(shape, tuple | list) else (shape,)))
        if shape.count(-1) == 1:
            known = math.prod(x for x in shape if x != -1)
            shape = tuple(self.size // known if x == -1 else x for x in shape)
        if math.prod(shape) != self.size or any(x < 1 for x in shape):
            raise KernelArgumentError(f"cannot reshape {self} ({self.size} elements) to {shape}")
        if not self.is_contiguous():
            raise KernelArgumentError(
                f"reshape of {self}: the view is not contiguous (after a step slice, permute or "
                f"broadcast); NKI refuses it too. Reshape the tensor before taking such a view."
            )
        if self._s.on_chip:
            if shape[0] != self.shape[0]:
                raise KernelArgumentError(
                    f"reshape of on-chip {self} to {shape}: the partition dimension must stay "
                    f"{self.shape[0]}"
                )
            return self._view(shape, (self.strides[0], *_row_major(shape[1:])))
        return self._view(shape, _row_major(shape))

    def permute(self, dims) -> NkiTensor:
        """Reorder the dimensions (an on-chip tensor keeps dim 0 first)."""
        dims = tuple(int(d) for d in dims)
        if sorted(dims) != list(range(self.ndim)):
            raise KernelArgumentError(f"permute: {dims} is not a permutation of 0..{self.ndim - 1}")
        if self._s.on_chip and dims[0] != 0:
            self._no_partition(0, "permute")
        return self._view([self.shape[d] for d in dims], [self.strides[d] for d in dims])

    def broadcast_to(self, shape) -> NkiTensor:
        """``nl.broadcast_to(self, shape)`` (the method of older NKI editions)."""
        from . import language as nl

        return nl.broadcast_to(self, shape)

    def broadcast(self, dim: int, size: int) -> NkiTensor:
        """Repeat a size-1 dimension ``size`` times (stride 0)."""
        dim = self._check_dim(dim, "broadcast")
        self._no_partition(dim, "broadcast")
        if self.shape[dim] != 1:
            raise KernelArgumentError(f"broadcast: dim {dim} of {self} has size {self.shape[dim]}")
        shape, strides = list(self.shape), list(self.strides)
        shape[dim], strides[dim] = int(size), 0
        return self._view(shape, strides)

    def expand_dim(self, dim: int) -> NkiTensor:
        """Insert a size-1 dimension at ``dim``."""
        if not isinstance(dim, numbers.Integral) or not 0 <= dim <= self.ndim:
            raise KernelArgumentError(f"expand_dim: {dim!r} is not a position in {self}")
        self._no_partition(int(dim), "expand_dim")
        shape, strides = list(self.shape), list(self.strides)
        shape.insert(dim, 1)
        strides.insert(dim, strides[dim] if dim < len(strides) else 1)
        return self._view(shape, strides)

    def squeeze_dim(self, dim: int) -> NkiTensor:
        """Remove a size-1 dimension."""
        dim = self._check_dim(dim, "squeeze_dim")
        self._no_partition(dim, "squeeze_dim")
        if self.shape[dim] != 1:
            raise KernelArgumentError(f"squeeze_dim: dim {dim} of {self} is not 1")
        return self._view(
            self.shape[:dim] + self.shape[dim + 1 :], self.strides[:dim] + self.strides[dim + 1 :]
        )

    def reshape_dim(self, dim: int, shape) -> NkiTensor:
        """Split dimension ``dim`` into ``shape`` (one entry may be -1)."""
        dim = self._check_dim(dim, "reshape_dim")
        shape = [int(x) for x in shape]
        n = self.shape[dim]
        if shape.count(-1) == 1:
            shape = [n // math.prod(x for x in shape if x != -1) if x == -1 else x for x in shape]
        if math.prod(shape) != n:
            raise KernelArgumentError(f"reshape_dim: {shape} does not hold the {n} of dim {dim}")
        if len(shape) > 1:
            self._no_partition(dim, "reshape_dim")
        s = self.strides[dim]
        inner = [s * x for x in _row_major(shape)]
        return self._view(
            self.shape[:dim] + tuple(shape) + self.shape[dim + 1 :],
            self.strides[:dim] + tuple(inner) + self.strides[dim + 1 :],
        )

    def flatten_dims(self, start_dim: int, end_dim: int) -> NkiTensor:
        """Merge dimensions ``start_dim..end_dim`` (inclusive; they must be contiguous)."""
        a = self._check_dim(start_dim, "flatten_dims")
        b = self._check_dim(end_dim, "flatten_dims")
        if b < a:
            raise KernelArgumentError(f"flatten_dims: end {end_dim} is before start {start_dim}")
        self._no_partition(a, "flatten_dims")
        for d in range(a, b):
            if self.strides[d] != self.strides[d + 1] * self.shape[d + 1]:
                raise KernelArgumentError(
                    f"flatten_dims({a}, {b}) of {self}: dims {d} and {d + 1} are not contiguous"
                )
        return self._view(
            (*self.shape[:a], math.prod(self.shape[a : b + 1]), *self.shape[b + 1 :]),
            (*self.strides[:a], self.strides[b], *self.strides[b + 1 :]),
        )

    def slice(self, dim: int, start: int, end: int, step: int = 1) -> NkiTensor:
        """``start:end:step`` of one dimension."""
        dim = self._check_dim(dim, "slice")
        key = [slice(None)] * self.ndim
        key[dim] = slice(start, end, step)
        return self[tuple(key)]

    def select(self, dim: int, index) -> NkiTensor:
        """Element ``index`` of dimension ``dim``, which is removed (a static index only)."""
        if not isinstance(index, numbers.Integral):
            raise NotModelledError(
                "select with a tensor index (dynamic, resolved at run time) is not modelled yet "
                "in trnlab.nki; a Python integer index is"
            )
        dim = self._check_dim(dim, "select")
        self._no_partition(dim, "select")
        key = [slice(None)] * self.ndim
        key[dim] = int(index)
        return self[tuple(key)]

    def ap(self, pattern, offset=None, scalar_offset=None, vector_offset=None, indirect_dim=0,
           dtype=None) -> NkiTensor:  # fmt: skip
        """An explicit access pattern ``[[stride, count], ...]`` over the storage (not
        composable: it ignores this view's shape and strides; ``offset=None`` keeps this
        view's offset, an integer adds to it)."""
        if scalar_offset is not None or vector_offset is not None:
            raise NotModelledError(
                "ap with scalar_offset / vector_offset (indirect access) is not modelled yet in "
                "trnlab.nki; static [[stride, count], ...] patterns are (with a dtype to read an "
                "HBM input's bits as another type)"
            )
        if dtype is not None:
            from ._dtypes import dtype_info
            from ._reinterpret import reinterpret

            new = reinterpret(self, dtype_info(dtype), "ap(dtype=...)")
            if new is not self:
                if self.offset:
                    raise NotModelledError(
                        f"ap(dtype=...) of a view at offset {self.offset} of {self._s.name!r}: "
                        f"call it on the whole tensor and give offset= in {new.dtype} elements"
                    )
                return new.ap(pattern, offset=offset)
        try:
            pairs = [(int(s), int(n)) for s, n in pattern]
        except (TypeError, ValueError):
            raise KernelArgumentError(
                f"ap pattern must be [[stride, count], ...]; got {pattern!r}"
            ) from None
        if not pairs or any(n < 1 for _, n in pairs):
            raise KernelArgumentError(f"ap pattern {pattern!r} needs counts >= 1")
        base = self.offset if offset is None else self.offset + int(offset)
        lo = base + sum(min(0, s * (n - 1)) for s, n in pairs)
        hi = base + sum(max(0, s * (n - 1)) for s, n in pairs)
        total = math.prod(self._s.shape)
        if lo < 0 or hi >= total:
            raise _index_error(
                f"ap pattern {pattern!r} at offset {base} reaches elements {lo}..{hi} of "
                f"{self._s.name!r}, which holds {total}"
            )
        st = self._s
        if st.on_chip and pairs[0][1] > 1 and pairs[0][0] != st.free:
            raise KernelArgumentError(
                f"ap on on-chip {self}: the partition stride (first pair) must be the storage's "
                f"free size {st.free}, so every partition makes the same access; got {pairs[0][0]}"
            )
        return self._view([n for _, n in pairs], [s for s, _ in pairs], base)

    def view(self, dtype) -> NkiTensor:
        """The whole tensor's bits read as another dtype (its last dimension rescaled): for a
        kernel input it has not written, decoded from the numpy argument (trnlab keeps values,
        not bit patterns; trnlab.nki._reinterpret)."""
        from ._dtypes import dtype_info
        from ._reinterpret import reinterpret

        d = dtype_info(dtype)
        if d is self._s.dtype:
            return self
        whole = NkiTensor(self._s)
        if self.offset or self.shape != whole.shape or self.strides != whole.strides:
            raise NotModelledError(
                f"view({dtype}) of part of {self._s.name!r} is not modelled yet in trnlab.nki; "
                f"view the whole tensor, then slice it"
            )
        return reinterpret(self, d, f"view({dtype})")

    reinterpret_cast = view

    def rearrange(self, *args, **kwargs):
        raise NotModelledError(
            "NkiTensor.rearrange is not modelled yet in trnlab.nki; use reshape_dim, permute "
            "and flatten_dims"
        )

    def indirect(self, *args, **kwargs):
        raise NotModelledError("NkiTensor.indirect (tensor indirection) is not modelled yet")

    def vector_select(self, *args, **kwargs):
        raise NotModelledError("NkiTensor.vector_select (indirect addressing) is not modelled yet")

    # --- older NKI editions: arithmetic operators ---------------------------------------------
    def _binary(self, other, op: str, reverse: bool = False):
        from . import language as nl

        f = getattr(nl, op)
        return f(other, self) if reverse else f(self, other)

    def __add__(self, o):
        return self._binary(o, "add")

    def __radd__(self, o):
        return self._binary(o, "add", True)

    def __sub__(self, o):
        return self._binary(o, "subtract")

    def __rsub__(self, o):
        return self._binary(o, "subtract", True)

    def __mul__(self, o):
        return self._binary(o, "multiply")

    def __rmul__(self, o):
        return self._binary(o, "multiply", True)

    def __truediv__(self, o):
        return self._binary(o, "divide")

    def __rtruediv__(self, o):
        return self._binary(o, "divide", True)

    def __neg__(self):
        from . import language as nl

        return nl.negative(self)

    def _inplace(self, o, op: str):
        from . import language as nl

        nl._update(self, o, op)
        return self

    def __iadd__(self, o):
        return self._inplace(o, "add")

    def __isub__(self, o):
        return self._inplace(o, "subtract")

    def __imul__(self, o):
        return self._inplace(o, "multiply")

    def __itruediv__(self, o):
        return self._inplace(o, "divide")

    # --- the engine model's view of this tensor -----------------------------------------------
    def _partition_dim(self) -> int:
        """The dimension of an on-chip view that holds the partitions: 0, or, after the block
        dimensions of an ``nl.par_dim`` tensor (strides below a partition's length), the
        first whose stride is a partition's length."""
        shape, strides, free = self.shape, self.strides, self._s.free
        if len(shape) > 2 and strides[0] < free:
            return next((d for d, s in enumerate(strides) if s >= free), len(shape) - 1)
        return 0

    def _region(self) -> tuple[int, int, int, int, int]:
        """``(p0, p1, f0, f1, elements)`` of an on-chip view in its ``[P, free]`` tile: the
        partitions, the bounding range of free offsets and the elements per partition."""
        st = self._s
        shape, strides = self.shape, self.strides
        free = st.free
        k = self._partition_dim()
        if k:  # block dimensions (nl.par_dim after them)
            if math.prod(shape[:k]) > 1:
                raise NotModelledError(
                    f"{self} holds {math.prod(shape[:k])} blocks of [{', '.join(map(str, shape[k:]))}] "
                    f"(nl.par_dim after block dimensions); an instruction takes one block at a "
                    f"time: use t[i]"
                )
            shape, strides = shape[k:], strides[k:]
        off = self.offset
        p0 = off // free
        n0 = shape[0]
        if n0 > 1 and strides[0] != free:
            raise NotModelledError(
                f"{self} steps over partitions (stride {strides[0]} where the partition stride "
                f"is {free}): the engine model takes a contiguous range of partitions"
            )
        base = off - p0 * free
        lo = hi = base
        elements = 1
        for n, s in zip(shape[1:], strides[1:], strict=True):
            elements *= n
            if s >= 0:
                hi += s * (n - 1)
            else:
                lo += s * (n - 1)
        if lo < 0 or hi >= free:
            raise NotModelledError(
                f"{self} reaches free offsets {lo}..{hi} of partitions that hold {free}: its "
                f"access crosses partitions, which an engine cannot do"
            )
        return p0, p0 + n0, lo, hi + 1, elements

    def _hbm_region(self) -> tuple[int, int, int, int, bool]:
        """``(r0, r1, c0, c1, exact)`` of an HBM view in its storage's ``[rows, cols]`` layout:
        the rectangle itself when the view is one (``exact``), else the bounding rows (and
        columns, within one row) of every element it touches."""
        st = self._s
        cols = st.cols
        merged = _merged(self.shape, self.strides)
        off = self.offset
        r0, c0 = divmod(off, cols)
        if not merged:
            return r0, r0 + 1, c0, c0 + 1, True
        if len(merged) == 1:
            n, s = merged[0]
            if s == 1 and c0 + n <= cols:
                return r0, r0 + 1, c0, c0 + n, True
            if s == 1 and c0 == 0 and n % cols == 0:
                return r0, r0 + n // cols, 0, cols, True
            if s == cols:
                return r0, r0 + n, c0, c0 + 1, True
        elif len(merged) == 2:
            (n1, s1), (n2, s2) = merged
            if s2 == 1 and s1 == cols and c0 + n2 <= cols:
                return r0, r0 + n1, c0, c0 + n2, True
        lo = off + sum(min(0, s * (n - 1)) for n, s in merged)
        hi = off + sum(max(0, s * (n - 1)) for n, s in merged)
        ra, ca = divmod(lo, cols)
        rb, cb = divmod(hi, cols)
        if ra == rb:
            return ra, ra + 1, ca, cb + 1, False
        return ra, rb + 1, 0, cols, False

    def _run_length(self) -> int:
        """Elements in each contiguous run of this view, walked in row-major order (what one
        DMA packet can move): the innermost dimensions that lie back to back in memory, within
        one partition for an on-chip view."""
        shape, strides = self.shape, self.strides
        if self._s.on_chip:
            k = self._partition_dim()
            shape, strides = shape[k + 1 :], strides[k + 1 :]
        merged = _merged(shape, strides)
        if not merged:
            return 1
        n, s = merged[-1]
        return n if s == 1 else 1

    def _arr(self) -> np.ndarray:
        """The numpy view of these elements (writeable; trailing axis of 4 for x4 types)."""
        st = self._s
        data = st.data
        if self.offset == 0 and self.shape == st.shape and self.strides == _row_major(st.shape):
            return data
        extra = data.shape[len(st.shape) :]
        k = math.prod(extra)
        isz = data.itemsize
        return np.lib.stride_tricks.as_strided(
            data.reshape(-1)[self.offset * k :],
            shape=self.shape + extra,
            strides=tuple(s * k * isz for s in self.strides) + data.strides[len(st.shape) :],
        )
