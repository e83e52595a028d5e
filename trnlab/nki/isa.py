"""``nki.isa`` on trnlab's engine model: one function per NeuronCore instruction.

Import it as NKI code does (``import trnlab.nki.isa as nisa``). Each instruction checks its
operands against the NKI rules (memory, partitions, sizes, dtypes per generation), computes
its values (float32 math, rounded to the output's dtype) and is recorded for the engine
timeline. Calls follow NKI's current signatures (``dst=`` first); the older value-returning
forms (``nisa.nc_matmul(a, b)``, ``nisa.activation(op=nl.exp, data=t)``) also work and return
a new tile.

Modelled: ``dma_copy``, ``nc_matmul``, ``nc_matmul_mx`` (NeuronCore-v4), ``nc_transpose``,
``tensor_copy``, ``memset``, ``activation`` (scale, bias, free-axis reduction),
``activation_reduce``, ``tensor_tensor``, ``tensor_scalar``, ``tensor_reduce``,
``tensor_partition_reduce``, ``reciprocal``, ``iota``, ``affine_select``, ``bn_stats``,
``bn_aggr``, ``tensor_tensor_scan``, ``get_nc_version``. Any other ``nki.isa`` name raises
:class:`~trnlab.nki.NotModelledError`.
"""

from __future__ import annotations

import math
import numbers
import warnings
from enum import Enum

import numpy as np

from trnlab.core import (
    FormatNotSupportedError,
    HardwareRuleError,
    KernelArgumentError,
    OperandPlacementError,
    TileIndexError,
    TileTooLargeError,
)

from . import _numerics as N
from . import _observe
from ._dtypes import dtype_info, round_to
from ._errors import NotModelledError, missing, option
from ._index import IndexExpr
from ._indirect import IndirectView
from ._mask import Mask, Overhang, check_mask, give_masks, whole_grid_only
from ._tensor import MemoryRegion, NkiTensor
from ._trace import current

NkiValidationError = HardwareRuleError
"""Raised when a hardware rule is broken (trnlab.core's HardwareRuleError and its kinds)."""


class engine(Enum):
    """NeuronCore engines."""

    tensor = 1
    vector = 5
    scalar = 2
    gpsimd = 3
    dma = 4
    sync = 6
    unknown = 0


tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown


class reduce_cmd(Enum):
    """Accumulator-register commands of the Scalar engine's activation."""

    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dge_mode(Enum):
    """How a DMA's descriptors are made."""

    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode(Enum):
    """Out-of-bounds handling of indirect DMAs: an index outside the tensor is an error, or
    its row is skipped."""

    error = 0
    skip = 1


class matmul_perf_mode(Enum):
    """Tensor Engine performance modes (double_row is not modelled)."""

    none = "none"
    double_row = "double_row"


class nc_version(Enum):
    """NeuronCore generation of the target."""

    gen2 = 2
    gen3 = 3
    gen4 = 4


class dma_engine(Enum):
    dma = 1
    gpsimd_dma = 2


_ON_CHIP = (MemoryRegion.sbuf, MemoryRegion.psum)
_SBUF = (MemoryRegion.sbuf,)
_PSUM = (MemoryRegion.psum,)
_DGE = {dge_mode.unknown: None, dge_mode.none: "none", dge_mode.swdge: "sw", dge_mode.hwdge: "hw"}
_MATMUL_DTYPES = ("float8_e4m3", "float8_e5m2", "bfloat16", "float16", "tfloat32", "float32")
# NeuronCore-v4 adds OCP fp8 (and trnlab's unpacked MX tiles, see nki._dtypes)
_V4_MATMUL_DTYPES = ("float8_e4m3fn", "mxfp8_e4m3", "mxfp8_e5m2", "mxfp4")


# --- operand helpers ----------------------------------------------------------------------------
def _tensor(x, what: str, api: str) -> NkiTensor:
    if type(x) is not NkiTensor:
        if type(x) is Overhang:  # an access past its tensor, outside a masked load / store
            raise x.error
        raise KernelArgumentError(
            f"nisa.{api}: {what} must be an NKI tensor (nl.ndarray or a view of one), not "
            f"{type(x).__name__} {x!r}"
        )
    return x


def _where(x: NkiTensor, allow, what: str, api: str):
    """The tile region of on-chip ``x``, checking its memory against ``allow``."""
    b = x._s.buffer
    if b not in allow:
        names = " or ".join(m.name.upper() for m in allow)
        hint = (
            " HBM data reaches the engines through a DMA (nisa.dma_copy / nl.load) into SBUF."
            if b not in _ON_CHIP
            else ""
        )
        raise OperandPlacementError(
            f"nisa.{api}: {what} {x.name!r} is in {b.name.upper()}; it must be in {names}.{hint}"
        )
    return x._region()


def _ref(x: NkiTensor, reg) -> tuple:
    return (x._s, reg[0], reg[1], reg[2], reg[3])


def _same_partitions(a, ra, b, rb, api: str, wa: str, wb: str) -> None:
    if ra[1] - ra[0] != rb[1] - rb[0]:
        n = ra[1] - ra[0]
        raise HardwareRuleError(
            f"nisa.{api}: {wa} spans {n} partition{'' if n == 1 else 's'} and {wb} "
            f"{rb[1] - rb[0]}; they must match (an engine works partition by partition)."
        )


def _same_elements(ra, rb, api: str, wa: str, wb: str) -> None:
    if ra[4] != rb[4]:
        raise HardwareRuleError(
            f"nisa.{api}: {wa} has {ra[4]} elements per partition and {wb} {rb[4]}; they must match"
        )


def _engine(e, allowed: tuple[str, ...], default: str, api: str) -> str:
    if e is None or e is engine.unknown:
        return default
    name = e.name if isinstance(e, engine) else str(e)
    if name not in allowed:
        raise KernelArgumentError(
            f"nisa.{api} runs on the {' or '.join(allowed)} engine, not {name}"
        )
    return name


def _no_psum(engine_name: str, api: str, *tensors) -> None:
    if engine_name != "gpsimd":
        return
    for x in tensors:
        if x is not None and x._s.buffer is MemoryRegion.psum:
            raise OperandPlacementError(
                f"nisa.{api} on GpSimd touches PSUM tile {x.name!r}; GpSimd has no PSUM port. "
                f"Use the Vector or Scalar engine, or an SBUF tile."
            )


def _flat(x: NkiTensor) -> np.ndarray:
    """Values of on-chip ``x`` as ``[partitions, elements]`` float32."""
    a = x._arr()
    return a.reshape(x.shape[0], -1)


def _put(dst: NkiTensor, values, src_dtype=None) -> None:
    """Round ``values`` to ``dst``'s dtype and write them (any shape with dst's elements);
    values already of ``dst``'s dtype (``src_dtype``, a copy) are written as they are."""
    a = dst._arr()
    d = dst._s.dtype
    v = np.asarray(values, np.float32)
    a[...] = (v if src_dtype is d else round_to(v, d)).reshape(a.shape)


def _written(first: NkiTensor, missing: str, api: str) -> None:
    """The older call forms put the data first; a first tile nothing has written yet is the
    destination of a call whose ``missing`` operand was forgotten."""
    if first._s.first < 0 and not first._s.input:
        raise KernelArgumentError(
            f"nisa.{api}: {missing} is missing. In the older form nisa.{api}(data, ...) the "
            f"first tile is the input, but {first._s.name!r} holds no values yet; with dst= "
            f"pass the input as {missing}= too."
        )


def _layout(*tensors: NkiTensor) -> tuple:
    """Which elements each view takes and in what order (a region is only their bounds)."""
    return tuple((t.shape, t.strides, t.offset) for t in tensors)


def _record(tr, name, eng, dst, rd, ins, api, elements=None, func=-1, sig=None) -> None:
    """Append a Vector / Scalar / GpSimd instruction; ``sig`` (its parameters besides the
    operands) lets the compiler compute a repeat of it once (trnlab.nki._reuse)."""
    if dst._s.buffer is MemoryRegion.psum:
        _mark(dst._s, rd)
    if sig is not None:
        sig = (sig, _layout(dst, *[t for t, _ in ins]))
    tr.add(
        ("op", name, eng, _ref(dst, rd), tuple(_ref(t, r) for t, r in ins),
         rd[4] if elements is None else elements, func),
        api, dst._s, *[t._s for t, _ in ins], sig=sig,
    )  # fmt: skip


def _output_and_input(dst, src, api: str, what: str, where=None) -> tuple[tuple, tuple]:
    """The regions of an elementwise instruction's output ``dst`` and its input ``src``
    (named ``what``): on chip (or in ``where``), on the same partitions, as many elements."""
    where = _ON_CHIP if where is None else where
    rd = _where(dst, where, "dst", api)
    r = _where(src, where, what, api)
    _same_partitions(dst, rd, src, r, api, "dst", what)
    _same_elements(rd, r, api, "dst", what)
    return rd, r


def _scalar_or_vector(v, rows: tuple, what: str, api: str):
    """A number, or an on-chip ``[P, 1]`` tensor on the same partitions: (value, tensor, reg)."""
    if type(v) is NkiTensor:
        r = _where(v, _ON_CHIP, what, api)
        if r[4] != 1 or r[1] - r[0] != rows[1] - rows[0]:
            raise HardwareRuleError(
                f"nisa.{api}: {what} must be a number or a [{rows[1] - rows[0]}, 1] tile (one "
                f"value per partition); got {v.shape}"
            )
        return None, v, r
    if isinstance(v, numbers.Real) and not isinstance(v, bool):
        if not math.isfinite(float(v)):
            raise KernelArgumentError(f"nisa.{api}: {what} must be finite, got {v!r}")
        return float(v), None, None
    _tensor(v, what, api)  # an access past its tensor raises its index error here
    raise KernelArgumentError(f"nisa.{api}: {what} must be a number or a tile, not {v!r}")


def _vals(value, t, numerics):
    if not numerics:
        return None
    return np.float32(value) if t is None else _flat(t)


def _new(shape, dtype, buffer, depth: int = 4) -> NkiTensor:
    return current().tensor(shape, dtype_info(dtype), buffer, depth=depth)


def _one_input(dst, src, dtype, what: str, api: str):
    """``(dst, src, returned)`` of a one-input instruction called as NKI does (``dst=, src=``)
    or in the older value-returning form (``f(src)``: a new SBUF tile, also returned)."""
    if src is None:
        src, dst = dst, None
    src = _tensor(src, what, api)
    ret = None
    if dst is None:
        dst = ret = _new(src.shape, dtype or src.dtype, MemoryRegion.sbuf, depth=5)
    return _tensor(dst, "dst", api), src, ret


def _chip_shape(shape, keep: int | None = None) -> tuple[int, ...]:
    """The on-chip shape holding an HBM view's elements. On-chip tiles are at least 2-D: a 1-D
    view made by an integer index (``A[0:128, j]``) keeps that dimension at size 1, as NKI
    keeps an on-chip view 2-D (so ``(128, 1)``: one element on each of 128 partitions); any
    other 1-D view goes on one partition."""
    if len(shape) >= 2:
        return tuple(shape)
    return (shape[0], 1) if keep == 1 else (1, shape[0])


# --- DMA ----------------------------------------------------------------------------------------
def _packets(dst: NkiTensor, src: NkiTensor) -> int:
    """The contiguous runs (DMA packets) a copy of ``src`` into ``dst`` is made of: a packet
    ends wherever either side's run ends (both walked in row-major order)."""
    n = dst.size
    a, b = dst._run_length(), src._run_length()
    return -(-n // a) + -(-n // b) - n // math.lcm(a, b)


def _dma_sbuf_side(x: NkiTensor, what: str, api: str) -> tuple:
    """The region of a DMA's on-chip side: SBUF (the DMA engines do not reach PSUM), each
    element taken once."""
    r = _where(x, _SBUF, what, api)
    if r[4] > r[3] - r[2]:
        raise option(
            api,
            f"an SBUF side that repeats elements (a stride-0 broadcast view {x})",
            "views that take each element once are (broadcast with nl.broadcast_to into a tile)",
        )
    return r


def _hwdge_rules(tr, dst, src, api: str) -> None:
    """Hardware DGE: NeuronCore-v3 and newer, and no cast (it moves raw bytes)."""
    if tr.gen < 3:
        raise HardwareRuleError(
            f"nisa.{api}: dge_mode=hwdge needs the hardware DGE of NeuronCore-v3 or newer; "
            f"{tr.params.chip} has none: leave dge_mode unset, or use none or swdge"
        )
    if dst.dtype != src.dtype:
        raise HardwareRuleError(
            f"nisa.{api}: {src.dtype} -> {dst.dtype} with dge_mode=hwdge: the hardware DGE "
            f"moves raw bytes and never casts (NKI enforces matching types since 0.3). "
            f"Reinterpret with .view(...) if the bytes are already right, or use dge_mode "
            f"swdge or none for a cast"
        )


def _indirect_dma(tr, dst, src, oob, dge, api: str) -> None:
    """A gather (``src`` an :class:`IndirectView`) or scatter (``dst`` one): partition ``p`` of
    the on-chip tile moves to or from row ``idx[p]`` of the HBM tensor.

    Timing: one DMA of ``P`` row transfers on a software-DGE queue (GpSimd makes its
    descriptors from the index values, as the Trainium2 guide says hardware DGE cannot do
    indirect DMAs), the HBM side recorded as the box of the rows it touches with the bytes it
    moves; a one-element GpSimd step reads the index tile first, so the DMA waits for the
    indices (an assumption: how long descriptor making takes per row is not published)."""
    load = isinstance(src, IndirectView)
    if isinstance(dst, IndirectView) and load:
        raise NotModelledError(f"nisa.{api}: an indirect DMA from HBM rows to HBM rows")
    view = src if load else dst
    tile = _tensor(dst if load else src, "dst" if load else "src", api)
    if not tile._s.on_chip:
        raise NotModelledError(
            f"nisa.{api}: an indirect DMA between HBM tensors; gather into an SBUF tile first"
        )
    if dge in ("hw", "none"):
        raise HardwareRuleError(
            f"nisa.{api}: an indirect DMA needs descriptors made at run time from the indices: "
            f"software DGE (the DGE guide; hardware DGE does not make them, and dge_mode=none "
            f"means descriptors prepared ahead); leave dge_mode unset or use swdge"
        )
    rt = _dma_sbuf_side(tile, "the on-chip side", api)
    idx = view.idx
    ri = _where(idx, _SBUF, "the index tile", api)
    if idx._s.dtype.kind != "int":
        raise FormatNotSupportedError(
            f"nisa.{api}: the index tile {idx.name!r} is {idx.dtype}; row indices are integers "
            f"(int32 or uint32, as nisa.iota makes them)"
        )
    parts = rt[1] - rt[0]
    if ri[1] - ri[0] != parts or ri[4] != 1:
        raise HardwareRuleError(
            f"nisa.{api}: the index tile {idx.shape} must hold one row index per partition of "
            f"the {tile.shape} tile ([{parts}, 1])"
        )
    if view.row_elements != rt[4]:
        raise HardwareRuleError(
            f"nisa.{api}: each row of {view.name} holds {view.row_elements} elements and each "
            f"partition of {tile.shape} {rt[4]}; they must match"
        )
    n_rows = view.base.shape[0]
    rows = np.arange(parts)  # timing only: which rows is unknown; the cost is the same
    moved = parts
    if tr.numerics:
        v = _flat(idx)[:, 0].astype(np.float64)
        if not np.all(np.isfinite(v)) or np.any(v != np.round(v)):
            raise KernelArgumentError(
                f"nisa.{api}: the index tile {idx.name!r} holds values that are not whole "
                f"numbers (NaN where it was never written?); an indirect DMA needs row indices"
            )
        rows = v.astype(np.int64)
        out = (rows < 0) | (rows >= n_rows)
        if out.any() and oob is not oob_mode.skip:  # an IndexError too, as NKI raises
            raise TileIndexError(
                f"nisa.{api}: partition {int(np.flatnonzero(out)[0])} asks for row "
                f"{int(rows[out][0])} of {view.base.name!r}, which has rows 0..{n_rows - 1} "
                f"(oob_mode=error, the default; oob_mode=nisa.oob_mode.skip leaves such rows out)"
            )
        keep = np.flatnonzero(~out)
        if load:
            values = _flat(tile).astype(np.float32).copy()
            for p in keep:
                values[p] = round_to(view.row(rows[p])._arr().reshape(-1).astype(np.float32),
                                     tile._s.dtype)  # fmt: skip
            _put(tile, values)
        else:
            values = _flat(tile)
            for p in keep:
                _put(view.row(rows[p]), values[p])
            view.base._s.stored = True
        moved = keep.size
        rows = rows[keep] if keep.size else np.arange(1)
    first, last = view.row(int(rows.min())), view.row(int(rows.max()))
    a, b = first._hbm_region(), last._hbm_region()
    ref_h = (view.base._s, a[0], b[1], min(a[2], b[2]), max(a[3], b[3]))
    ref_t = _ref(tile, rt)
    per_row = _row_packets(tile, first)
    _record(tr, "gpsimd", "gpsimd", tile, rt, [(idx, ri)], api, elements=1)  # reads indices
    # a skipped row moves no bytes; its descriptor is still processed (an assumption)
    n, pk = max(moved, 1) * rt[4], parts * per_row
    op = ("dma", ref_t, ref_h, "sw", n, pk) if load else ("dma", ref_h, ref_t, "sw", n, pk)
    tr.add(op, api, tile._s)


def _row_packets(tile: NkiTensor, row: NkiTensor) -> int:
    """DMA packets of one partition's transfer: contiguous runs of a row and of a partition."""
    n = row.size
    a, b = max(1, min(tile._run_length(), n)), max(1, row._run_length())
    return -(-n // a) + -(-n // b) - n // math.lcm(a, b)


def dma_copy(dst, src, priority=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown,
             engine=engine.unknown, name=None):  # fmt: skip
    """Copy ``src`` to ``dst`` with the DMA engines (HBM -> SBUF, SBUF -> HBM, SBUF -> SBUF
    across partitions, or HBM -> HBM), casting to ``dst``'s dtype; both hold the same number of
    elements (row-major order)."""
    api = "dma_copy"
    tr = current()
    if isinstance(dst, IndirectView) or isinstance(src, IndirectView):
        if dge_mode not in _DGE:
            raise KernelArgumentError(f"nisa.{api}: dge_mode must be a nisa.dge_mode")
        _indirect_dma(tr, dst, src, oob_mode, _DGE[dge_mode], api)
        return
    dst = _tensor(dst, "dst", api)
    src = _tensor(src, "src", api)
    if priority is not None:
        raise option(api, "priority (DMA quality of service)", "every DMA has one priority")
    if dge_mode not in _DGE:
        raise KernelArgumentError(f"nisa.{api}: dge_mode must be a nisa.dge_mode, not {dge_mode!r}")
    if dge_mode is globals()["dge_mode"].hwdge:
        _hwdge_rules(tr, dst, src, api)
    d_chip, s_chip = dst._s.on_chip, src._s.on_chip
    if dst.size != src.size:
        raise HardwareRuleError(
            f"nisa.{api}: dst {dst.shape} holds {dst.size} elements and src {src.shape} "
            f"{src.size}; a DMA copies as many as it reads"
        )
    if (dst._s.dtype.packed > 1) != (src._s.dtype.packed > 1):
        raise KernelArgumentError(
            f"nisa.{api}: {src.dtype} -> {dst.dtype}: x4-packed MX data moves as is; quantize "
            f"with nisa.quantize_mx (NeuronCore-v4) or pass MX inputs with nki.hbm(..., dtype)"
        )
    if d_chip and s_chip:
        rd = _dma_sbuf_side(dst, "dst", api)
        rs = _dma_sbuf_side(src, "src", api)
        if tr.numerics:
            _put(dst, src._arr(), src._s.dtype)
        exact = rd[3] - rd[2] == rd[4] and rs[3] - rs[2] == rs[4]
        n = None if exact else dst.size
        op = ("dma", _ref(dst, rd), _ref(src, rs), _DGE[dge_mode], n, _packets(dst, src))
        tr.add(op, api, dst._s, src._s)
        return
    if not d_chip and dst._s.frozen:
        raise NotModelledError(
            f"nisa.{api}: writing {dst._s.name!r}: {dst._s.frozen}. Writing a tensor also read "
            f"as another dtype is not modelled yet; store into a new nl.shared_hbm tensor"
        )
    if not (d_chip or s_chip):  # HBM -> HBM, never through SBUF
        *rd, d_exact = dst._hbm_region()
        *rs, s_exact = src._hbm_region()
        if tr.numerics:
            _put(dst, src._arr(), src._s.dtype)
        dst._s.stored = True
        n = None if d_exact and s_exact else dst.size
        op = ("dma", (dst._s, *rd), (src._s, *rs), _DGE[dge_mode], n, _packets(dst, src))
        tr.add(op, api)
        return
    tile, hbm = (dst, src) if d_chip else (src, dst)
    rt = _dma_sbuf_side(tile, "the on-chip side", api)
    *rh, exact = hbm._hbm_region()
    exact = exact and rt[3] - rt[2] == rt[4]  # a strided SBUF side is recorded as its box too
    if tr.numerics:
        _put(dst, src._arr(), src._s.dtype)
    if not d_chip:
        hbm._s.stored = True
    ref_t = _ref(tile, rt)
    ref_h = (hbm._s, *rh)
    n = None if exact else hbm.size  # a strided access: the bytes it moves, not its boxes
    dge = _DGE[dge_mode]
    pk = _packets(dst, src)
    op = ("dma", ref_t, ref_h, dge, n, pk) if d_chip else ("dma", ref_h, ref_t, dge, n, pk)
    tr.add(op, api, tile._s)


# --- PSUM regions written (the Tensor Engine's accumulation, engines writing PSUM) ----------
def _psum_written(s, reg) -> bool:
    """Whether any of region ``reg`` of PSUM storage ``s`` was written since allocation (the
    regions written are kept as a short list of rectangles)."""
    if s.mask is None:
        return False
    p0, p1, f0, f1 = reg[0], reg[1], reg[2], reg[3]
    for a, b, c, d in s.mask:
        if a < p1 and p0 < b and c < f1 and f0 < d:
            return True
    return False


def _mark(s, reg) -> None:
    r = (reg[0], reg[1], reg[2], reg[3])
    if s.mask is None:
        s.mask = [r]
    elif r not in s.mask:
        s.mask.append(r)


# --- Vector / Scalar / GpSimd -------------------------------------------------------------------
def tensor_copy(dst=None, src=None, engine=engine.unknown, name=None, dtype=None):
    """Copy ``src`` to ``dst`` on the Vector (default), Scalar or GpSimd engine, casting to
    ``dst``'s dtype: the way out of PSUM. Older form: ``tensor_copy(src, dtype=...)``."""
    api = "tensor_copy"
    tr = current()
    dst, src, ret = _one_input(dst, src, dtype, "src", api)
    eng = _engine(engine, ("vector", "scalar", "gpsimd"), "vector", api)
    if eng == "scalar" and tr.gen == 2:
        raise HardwareRuleError(
            f"nisa.{api} on the Scalar engine is not supported on {tr.params.name}; use "
            f"nisa.activation(op=nl.copy, ...) or the Vector engine"
        )
    _no_psum(eng, api, dst, src)
    rd, r = _output_and_input(dst, src, api, "src")
    if tr.numerics:
        _put(dst, _flat(src), src._s.dtype)
    _record(tr, "copy", eng, dst, rd, [(src, r)], api)
    return ret


def memset(dst=None, value=None, *rest, engine=None, name=None, shape=None, dtype=None,
           mask=None):  # fmt: skip
    """Fill ``dst`` with ``value`` (Vector engine by default, or GpSimd). Older form:
    ``nisa.memset(shape, value, dtype)`` fills and returns a new SBUF tile. The third
    positional argument is the engine (current form) or the dtype (older form)."""
    api = "memset"
    tr = current()
    ret = None
    kinds = type(tensor_engine)  # the engine enum (this function's argument shadows it)
    if len(rest) > 2:
        raise KernelArgumentError(
            f"nisa.{api} takes at most 4 positional arguments (dst, value, engine, name)"
        )
    if rest:
        if isinstance(rest[0], kinds):
            if engine is not None:
                raise KernelArgumentError(f"nisa.{api}: the engine is given twice")
            engine = rest[0]
        elif dtype is None:
            dtype = rest[0]  # memset(shape, value, dtype) of older editions
        else:
            raise KernelArgumentError(f"nisa.{api}: the dtype is given twice")
    if engine is None:
        engine = kinds.unknown
    _no_mask(mask, api)
    if shape is not None or isinstance(dst, (tuple, list)):  # the older form
        if shape is None:
            shape = dst
        if dtype is None:
            raise KernelArgumentError(
                f"nisa.{api}(shape, value, dtype): the older form needs a dtype for its new tile"
            )
        dst = ret = _new(_chip_shape(tuple(int(x) for x in shape)), dtype, MemoryRegion.sbuf,
                         depth=5)  # fmt: skip
    if value is None:
        raise KernelArgumentError(f"nisa.{api}: give the value to fill with (value=...)")
    dst = _tensor(dst, "dst", api)
    eng = _engine(engine, ("vector", "gpsimd"), "vector", api)
    _no_psum(eng, api, dst)
    rd = _where(dst, _ON_CHIP, "dst", api)
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise KernelArgumentError(f"nisa.{api}: value must be a number, not {value!r}")
    if dst._s.dtype.packed > 1 and value != 0:
        raise KernelArgumentError(f"nisa.{api}: x4-packed types take value=0 only")
    if dst._s.dtype.kind == "int" and not isinstance(value, numbers.Integral):
        warnings.warn(
            f"nisa.{api}: value {value!r} into a {dst.dtype} tile: NKI 0.3 and later refuse a "
            f"value that does not match the tile's dtype (pass an integer, {int(value)!r}); "
            f"older editions cast it, as trnlab does",
            stacklevel=2,
        )
    if tr.numerics:
        a = dst._arr()
        a[...] = round_to(np.full(a.shape, value, np.float32), dst._s.dtype)
    _record(tr, "memset", eng, dst, rd, [], api)
    return ret


def _reduce_res(reduce_res, parts: int, api: str) -> tuple:
    """An instruction's ``reduce_res`` tile and its region: one value on each of ``parts``
    partitions, on chip."""
    res = _tensor(reduce_res, "reduce_res", api)
    rr = _where(res, _ON_CHIP, "reduce_res", api)
    if rr[4] != 1 or rr[1] - rr[0] != parts:
        raise HardwareRuleError(
            f"nisa.{api}: reduce_res must be [{parts}, 1] (one value per partition); got "
            f"{res.shape}"
        )
    return res, rr


def _idle(cmd) -> bool:
    """The Scalar engine's accumulator registers are left alone."""
    return cmd in (reduce_cmd.idle, None)


def _act_reduce(tr, api, dst, rd, reduce_op, reduce_res, cmd, values):
    """The Scalar engine's accumulator registers (one per partition)."""
    if reduce_op is None and reduce_res is None and cmd in (reduce_cmd.idle, None):
        return
    if reduce_op is not None:
        N.name_of(reduce_op, {"add": None}, f"nisa.{api} reduce_op")
    if cmd in (reduce_cmd.idle, None) and reduce_op is not None:
        # NKI: idle does not modify reduce_regs, so this activation's reduction is dropped and
        # reduce_res reads the registers as they were. Kept as documented (a kernel that
        # relied on a silent reset would give wrong sums on the device), but said aloud.
        warnings.warn(
            f"nisa.{api}: reduce_op with reduce_cmd=idle (the default) leaves the Scalar "
            f"engine's reduce registers unchanged, so this activation's reduction is dropped"
            f"{' and reduce_res reads the registers as they were' if reduce_res is not None else ''}. "
            f"For this activation's own sums pass reduce_cmd=nisa.reduce_cmd.reset_reduce "
            f"(nisa.activation_reduce does), or reduce_cmd.reduce to add them to the registers.",
            stacklevel=4,
        )
    regs = tr.constants.setdefault("act_regs", np.zeros(tr.pmax, np.float32))
    p0, p1 = rd[0], rd[1]
    if cmd in (reduce_cmd.reset, reduce_cmd.reset_reduce):
        regs[p0:p1] = 0.0
    if cmd in (reduce_cmd.reduce, reduce_cmd.reset_reduce) and values is not None:
        regs[p0:p1] += values.reshape(p1 - p0, -1).sum(axis=1, dtype=np.float32)
    if cmd is reduce_cmd.load_reduce:
        raise option(api, "reduce_cmd.load_reduce", "idle, reset, reduce and reset_reduce are")
    if reduce_res is not None:
        res, rr = _reduce_res(reduce_res, p1 - p0, api)
        if tr.numerics:
            _put(res, regs[p0:p1])
        # reading the registers out is one more (short) Scalar instruction, after this one
        _record(tr, "copy", "scalar", res, rr, [(dst, rd)], api, elements=1)


def activation(dst=None, op=None, data=None, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=reduce_cmd.idle, name=None, dtype=None):  # fmt: skip
    """Scalar engine: ``dst = op(data * scale + bias)``; ``scale`` a number or a ``[P, 1]``
    tile, ``bias`` a ``[P, 1]`` tile (or a number from NeuronCore-v3). With ``reduce_op=nl.add``
    the activated values are also summed along the free axes into the engine's registers
    (``reduce_cmd``) and read out to ``reduce_res``. Older form: ``activation(op=..., data=...)``
    returns a new tile."""
    api = "activation"
    tr = current()
    ret = None
    if type(dst) is not NkiTensor:  # activation(op, data, ...) of older NKI editions
        if data is None and type(op) is NkiTensor:
            op, data = dst, op
        elif op is None and data is not None:  # activation(np.exp, data=...)
            op = dst
        elif dst is not None:
            raise KernelArgumentError(f"nisa.{api}: dst must be a tile, not {dst!r}")
        data = _tensor(data, "data", api)
        dst = ret = _new(data.shape, dtype or data.dtype, MemoryRegion.sbuf)
    fname = N.name_of(op, N.ACT, f"nisa.{api} op")
    data = _tensor(data, "data", api)
    rd, r = _output_and_input(dst, data, api, "data")
    s_val, s_t, s_r = _scalar_or_vector(scale, r, "scale", api)
    b_val, b_t, b_r = (0.0, None, None) if bias is None else _scalar_or_vector(bias, r, "bias", api)
    if bias is not None and b_t is None and tr.gen == 2:
        raise HardwareRuleError(
            f"nisa.{api}: on {tr.params.name} the bias must be a [P, 1] tile (a number is "
            f"allowed from NeuronCore-v3); make one with nl.full((P, 1), value, nl.float32)"
        )
    values = None
    if tr.numerics:
        x = _flat(data) * _vals(s_val, s_t, True) + _vals(b_val, b_t, True)
        with np.errstate(all="ignore"):
            values = N.ACT[fname](x.astype(np.float32)).astype(np.float32)
        _put(dst, values)
        values = _flat(dst)
    ins = [(data, r)] + [(t, rr) for t, rr in ((s_t, s_r), (b_t, b_r)) if t is not None]
    plain = reduce_op is None and reduce_res is None and _idle(reduce_cmd)
    sig = (s_val, b_val, s_t is None, b_t is None) if plain else None
    _record(tr, "activation", "scalar", dst, rd, ins, api, func=N.act_id(fname), sig=sig)
    _act_reduce(tr, api, dst, rd, reduce_op, reduce_res, reduce_cmd, values)
    return ret


def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None):
    """``activation`` whose activated values are summed along the free axes into
    ``reduce_res`` (``[P, 1]``) in the same instruction."""
    return activation(dst, op, data, bias=bias, scale=scale, reduce_op=reduce_op,
                      reduce_res=reduce_res, reduce_cmd=reduce_cmd.reset_reduce)  # fmt: skip


def tensor_tensor(dst=None, data1=None, data2=None, op=None, engine=engine.unknown, name=None,
                  dtype=None):  # fmt: skip
    """Elementwise ``dst = data1 <op> data2`` on the Vector engine (GpSimd for ``nl.power``
    and all-int32 operands); the inputs may not both be in PSUM. Older form:
    ``tensor_tensor(data1, data2, op)`` returns a new tile."""
    api = "tensor_tensor"
    tr = current()
    ret = None
    if data2 is None and type(dst) is NkiTensor and type(data1) is NkiTensor:
        _written(dst, "data2", api)
        dst, data1, data2 = None, dst, data1  # tensor_tensor(data1, data2, op=...)
    elif op is None and type(data2) is not NkiTensor:  # tensor_tensor(data1, data2, op)
        dst, data1, data2, op = None, dst, data1, data2
    if dst is None:
        a0 = _tensor(data1, "data1", api)
        dst = ret = _new(a0.shape, dtype or a0.dtype, MemoryRegion.sbuf)
    dst = _tensor(dst, "dst", api)
    a = _tensor(data1, "data1", api)
    b = _tensor(data2, "data2", api)
    oname = N.name_of(op, N.ALU, f"nisa.{api} op")
    ints = all(x.dtype in ("int32", "uint32") for x in (dst, a, b))
    psum = any(x._s.buffer is MemoryRegion.psum for x in (dst, a, b))
    default = "gpsimd" if (oname == "power" or ints) and not psum else "vector"
    eng = _engine(engine, ("vector", "gpsimd"), default, api)
    _no_psum(eng, api, dst, a, b)
    rd, ra, rb = _binary_regions(dst, a, b, api, "data1", "data2")
    if tr.numerics:
        with np.errstate(all="ignore"):
            _put(dst, N.ALU[oname](_flat(a), _flat(b)))
    _record(tr, "tensor_tensor", eng, dst, rd, [(a, ra), (b, rb)], api, sig=(oname,))
    return ret


def tensor_scalar(dst=None, data=None, op0=None, operand0=None, reverse0=False, op1=None,
                  operand1=None, reverse1=False, engine=engine.unknown, name=None,
                  dtype=None):  # fmt: skip
    """``dst = (data <op0> operand0) <op1> operand1`` with numbers or ``[P, 1]`` tiles,
    broadcast along the free axes (Vector engine by default; Scalar or GpSimd on request)."""
    api = "tensor_scalar"
    tr = current()
    ret = None
    if data is None and type(dst) is NkiTensor and op0 is not None:
        _written(dst, "data", api)
        dst, data = None, dst  # tensor_scalar(data, op0=..., operand0=...)
    elif data is not None and type(data) is not NkiTensor:  # tensor_scalar(data, op0, operand0)
        dst, data, op0, operand0 = None, dst, data, op0
    if dst is None:
        d0 = _tensor(data, "data", api)
        dst = ret = _new(d0.shape, dtype or d0.dtype, MemoryRegion.sbuf)
    dst = _tensor(dst, "dst", api)
    data = _tensor(data, "data", api)
    eng = _engine(engine, ("vector", "scalar", "gpsimd"), "vector", api)
    _no_psum(eng, api, dst, data)
    rd, r = _output_and_input(dst, data, api, "data")
    n0 = N.name_of(op0, N.ALU, f"nisa.{api} op0")
    v0, t0, r0 = _scalar_or_vector(operand0, r, "operand0", api)
    ins = [(data, r)] + ([(t0, r0)] if t0 is not None else [])
    n1 = v1 = t1 = None
    if op1 is not None:
        n1 = N.name_of(op1, N.ALU, f"nisa.{api} op1")
        v1, t1, r1 = _scalar_or_vector(operand1, r, "operand1", api)
        if t1 is not None:
            ins.append((t1, r1))
    elif operand1 is not None:
        raise KernelArgumentError(f"nisa.{api}: operand1 given without op1")
    _no_psum(eng, api, t0, t1)
    if tr.numerics:
        x = _flat(data)
        with np.errstate(all="ignore"):
            o = _vals(v0, t0, True)
            x = N.ALU[n0](o, x) if reverse0 else N.ALU[n0](x, o)
            if n1 is not None:
                o = _vals(v1, t1, True)
                x = N.ALU[n1](o, x) if reverse1 else N.ALU[n1](x, o)
        _put(dst, x)
    sig = (n0, v0, bool(reverse0), n1, v1, bool(reverse1))
    _record(tr, "tensor_scalar", eng, dst, rd, ins, api, sig=sig)
    return ret


#: The ALU's bit-vector operators (NKI's operator table: bitwise and / or / xor / not and the
#: shifts; its logical and / or / xor are arithmetic, taking any dtype as float32).
_BITVEC = ("bitwise_", "left_shift", "right_shift")


def _arithmetic(op, what: str, api: str) -> str:
    """The NKI name of ALU operator ``op``, refused if it is a bit-vector one (the
    instructions that fold or chain in float32 take arithmetic operators only)."""
    name = N.name_of(op, N.ALU, f"nisa.{api} {what}")
    if name.startswith(_BITVEC):
        raise KernelArgumentError(
            f"nisa.{api}: {what} must be an arithmetic operator (NKI: no bit-vector operators in "
            f"this instruction), not {name}"
        )
    return name


def scalar_tensor_tensor(dst=None, data=None, op0=None, operand0=None, op1=None, operand1=None,
                         reverse0=False, reverse1=False, name=None, dtype=None):  # fmt: skip
    """``dst = (data <op0> operand0) <op1> operand1`` on the Vector engine: ``operand0`` a number
    or a ``[P, 1]`` tile broadcast along the free axes, ``operand1`` a tile of ``data``'s size;
    float32 math, arithmetic operators only. Cost: on NeuronCore-v2 the SDK 2.26 ISA
    reference's table (``N`` cycles for bf16 ``data`` and ``operand1`` with subtract then
    multiply and ``N`` even, ``2N`` otherwise); later, as NKI 0.6's reference says, about one
    ``tensor_tensor`` (the broadcast stage is free), and charged as one. ``data`` and
    ``operand1`` may not both be in PSUM. Older form (keywords, no ``dst``): returns a new SBUF
    tile of ``dtype`` (default ``data``'s)."""
    api = "scalar_tensor_tensor"
    tr = current()
    ret = None
    if data is None or op0 is None or op1 is None or operand1 is None or operand0 is None:
        raise KernelArgumentError(
            f"nisa.{api} needs data, op0, operand0, op1 and operand1 (and dst, or the older "
            f"form's returned tile): (data <op0> operand0) <op1> operand1"
        )
    if dst is None:
        d0 = _tensor(data, "data", api)
        dst = ret = _new(d0.shape, dtype or d0.dtype, MemoryRegion.sbuf)
    dst = _tensor(dst, "dst", api)
    data = _tensor(data, "data", api)
    other = _tensor(operand1, "operand1", api)
    n0 = _arithmetic(op0, "op0", api)
    n1 = _arithmetic(op1, "op1", api)
    rd, r, ro = _binary_regions(dst, data, other, api, "data", "operand1")
    v0, t0, r0 = _scalar_or_vector(operand0, r, "operand0", api)
    ins = [(data, r), (other, ro)] + ([(t0, r0)] if t0 is not None else [])
    if tr.numerics:
        with np.errstate(all="ignore"):
            x = _flat(data)
            o = _vals(v0, t0, True)
            x = N.ALU[n0](o, x) if reverse0 else N.ALU[n0](x, o)
            y = _flat(other)
            x = N.ALU[n1](y, x) if reverse1 else N.ALU[n1](x, y)
        _put(dst, x)
    sig = (n0, v0, bool(reverse0), n1, bool(reverse1))
    if tr.gen == 2:  # the SDK 2.26 ISA reference's own table for NeuronCore-v2
        n = rd[4]
        fast = (data.dtype, other.dtype, n0, n1) == (
            "bfloat16", "bfloat16", "subtract", "multiply"
        ) and n % 2 == 0  # fmt: skip
        _record(tr, "tensor_scalar", "vector", dst, rd, ins, api, n if fast else 2 * n, sig=sig)
    else:
        _record(tr, "tensor_tensor", "vector", dst, rd, ins, api, sig=sig)
    return ret


_RESET_REDUCE = reduce_cmd.reset_reduce
_REDUCE = reduce_cmd.reduce
_LOAD_REDUCE = reduce_cmd.load_reduce
_FOLD = {
    "add": np.sum,
    "multiply": np.prod,
    "maximum": np.max,
    "minimum": np.min,
}


def tensor_scalar_reduce(dst=None, data=None, op0=None, operand0=None, reduce_op=None,
                         reduce_res=None, reverse0=False, reduce_cmd=reduce_cmd.reset_reduce,
                         reduce_init=None, reduce_res_negate=False, name=None, dtype=None,
                         mask=None):  # fmt: skip
    """``dst = data <op0> operand0`` (one tensor_scalar stage) and ``reduce_res`` the fold of
    ``dst`` over its free axes with ``reduce_op`` (add, multiply, max, min), on the Vector
    engine: the ISA gives ``max(MIN_II, N) + MIN_II`` cycles, a tensor_scalar and a short
    read-out. Older form (keywords only, no ``dst``): returns a new tile."""
    api = "tensor_scalar_reduce"
    _no_mask(mask, api)
    if reduce_cmd is not _RESET_REDUCE or reduce_init is not None:
        what = f"reduce_cmd={reduce_cmd} / reduce_init (folding across instructions)"
        raise option(f"nisa.{api}", what, "reduce_cmd.reset_reduce is")
    fold = N.name_of(reduce_op, {**_FOLD, "subtract": None}, f"nisa.{api} reduce_op")
    if fold == "subtract":  # the older editions' API reference lists it; the current one not
        raise option(f"nisa.{api}", "reduce_op=subtract (older editions)",
                     "add, multiply, max and min are")  # fmt: skip
    _arithmetic(op0, "op0", api)
    if reduce_res is None:
        raise option(f"nisa.{api}", "no reduce_res (the fold left in the Vector engine's "
                     "accumulators for a later instruction)", "reduce_res=[P, 1] tile is")  # fmt: skip
    ret = tensor_scalar(dst=dst, data=data, op0=op0, operand0=operand0, reverse0=reverse0,
                        dtype=dtype)  # fmt: skip
    out = dst if ret is None else ret
    tr = current()
    rd = out._region()
    res, rr = _reduce_res(reduce_res, rd[1] - rd[0], api)
    if tr.numerics:
        v = _FOLD[fold](_flat(out).astype(np.float32), axis=1)
        _vector_regs(tr)[rd[0] : rd[1]] = v  # the fold stays in the accumulators
        _put(res, -v if reduce_res_negate else v)
    _record(tr, "copy", "vector", res, rr, [(out, rd)], api, elements=1)  # the read-out
    return ret


def _axes(x: NkiTensor, axis, api: str) -> tuple[int, ...]:
    ax = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
    nd = x.ndim
    ax = tuple(sorted(int(a) % nd for a in ax))
    if not ax or 0 in ax or ax != tuple(range(nd - len(ax), nd)):
        raise HardwareRuleError(
            f"nisa.{api}: axis {axis!r} of a {nd}-D tile; reductions take the last free axes, "
            f"ending at the final one (e.g. {tuple(range(1, nd))[-1:]}), never the partition "
            f"axis 0 (reduce across partitions with nisa.tensor_partition_reduce or a matmul "
            f"with ones)"
        )
    return ax


def _fold_left(fn, cast=None):
    """A reduction over the last ``len(axis)`` axes that folds element by element from the
    left (the order matters for subtract): ``x0 op x1 op x2 ...``."""

    def reduce(x, axis, keepdims=False):
        ax = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
        lead = x.shape[: x.ndim - len(ax)]
        v = x.reshape(*lead, -1)
        v = v if cast is None else cast(v)
        out = fn.reduce(v, axis=-1)
        return out.astype(np.float32) if out.dtype == bool else out

    return reduce


#: tensor_reduce's operators beyond the shared reductions: NKI's ALU table marks these
#: legal reduction ops too (nki.api.shared, "Legal Reduction op").
_MORE_REDUCTIONS = {
    "subtract": _fold_left(np.subtract),
    "bitwise_xor": _fold_left(np.bitwise_xor, lambda v: np.nan_to_num(v).astype(np.int64)),
    "logical_and": _fold_left(np.logical_and, lambda v: v != 0),
    "logical_or": _fold_left(np.logical_or, lambda v: v != 0),
    "logical_xor": _fold_left(np.logical_xor, lambda v: v != 0),
}
_TENSOR_REDUCE = {**N.REDUCE, **_MORE_REDUCTIONS}


def tensor_reduce(dst=None, op=None, data=None, axis=None, negate=False, keepdims=False, name=None,
                  dtype=None):  # fmt: skip
    """Reduce ``data`` along its last free axes on the Vector engine (add, maximum, minimum,
    multiply, average; bitwise and/or/xor of integer tiles; logical and/or/xor; subtract, read
    as a left fold ``x0 - x1 - ...``: the order is not published, an assumption), optionally
    negated (arithmetic ones). Older form: ``tensor_reduce(op, data, axis)`` returns a new
    tile."""
    api = "tensor_reduce"
    tr = current()
    ret = None
    if type(dst) is not NkiTensor:  # tensor_reduce(op, data, axis, ...) of older editions
        if type(op) is NkiTensor:
            op, data, axis = dst, op, (data if axis is None else axis)
        elif op is None:  # tensor_reduce(np.max, data=..., axis=...)
            op = dst
        d0 = _tensor(data, "data", api)
        ax = _axes(d0, axis, api)
        shape = tuple(1 if i in ax else n for i, n in enumerate(d0.shape)) if keepdims else (
            tuple(n for i, n in enumerate(d0.shape) if i not in ax) or (d0.shape[0],))  # fmt: skip
        if len(shape) < 2:
            shape = (d0.shape[0], 1)
        dst = ret = _new(shape, dtype or d0.dtype, MemoryRegion.sbuf)
    dst = _tensor(dst, "dst", api)
    data = _tensor(data, "data", api)
    oname = N.name_of(op, _TENSOR_REDUCE, f"nisa.{api} op")
    if oname.startswith("bitwise_"):
        if data._s.dtype.kind != "int":
            raise FormatNotSupportedError(
                f"nisa.{api}: {oname} is a bit-vector operation; data is {data.dtype}, it takes "
                f"integer tiles (NKI's ALU table)"
            )
        if negate:
            raise KernelArgumentError(
                f"nisa.{api}: negate applies to arithmetic reductions, not {oname}"
            )
    ax = _axes(data, axis, api)
    rd = _where(dst, _ON_CHIP, "dst", api)
    r = _where(data, _ON_CHIP, "data", api)
    _same_partitions(dst, rd, data, r, api, "dst", "data")
    kept = math.prod(n for i, n in enumerate(data.shape) if i not in ax) // data.shape[0]
    if rd[4] != kept:
        raise HardwareRuleError(
            f"nisa.{api}: reducing axes {ax} of {data.shape} leaves {kept} elements per "
            f"partition; dst {dst.shape} holds {rd[4]}"
        )
    if tr.numerics:
        with np.errstate(all="ignore"):
            v = _TENSOR_REDUCE[oname](data._arr(), axis=ax)
        _put(dst, -v if negate else v)
    _record(tr, "reduce", "vector", dst, rd, [(data, r)], api, elements=r[4])
    return ret


def tensor_partition_reduce(dst=None, op=None, data=None, name=None, dtype=None):
    """Reduce across partitions on GpSimd: ``data [P, F...] -> dst [1, F...]`` (add, average,
    maximum, bitwise or/and). Older form: ``tensor_partition_reduce(op, data)`` returns a new
    one-partition SBUF tile."""
    api = "tensor_partition_reduce"
    tr = current()
    ret = None
    if data is None and type(dst) is not NkiTensor:  # older: (op, data[, dtype=])
        dst, op, data = None, dst, op
    if data is None or op is None:
        raise KernelArgumentError(f"nisa.{api} needs op and data (and dst, or the older form)")
    data = _tensor(data, "data", api)
    if dst is None:
        dst = ret = _new((1, *data.shape[1:]), dtype or data.dtype, MemoryRegion.sbuf, depth=5)
    dst = _tensor(dst, "dst", api)
    oname = N.name_of(op, N.REDUCE, f"nisa.{api} op")
    if oname in ("minimum", "multiply"):
        raise KernelArgumentError(
            f"nisa.{api} takes add, average, maximum, bitwise_or or bitwise_and; not {oname}"
        )
    rd = _where(dst, _SBUF, "dst", api)
    r = _where(data, _SBUF, "data", api)
    if rd[1] - rd[0] != 1 or rd[4] != r[4]:
        raise HardwareRuleError(
            f"nisa.{api}: dst must be [1, {r[4]}] (one partition, data's free size); got "
            f"{dst.shape}"
        )
    if tr.numerics:
        _put(dst, N.REDUCE[oname](_flat(data), axis=0, keepdims=True))
    _record(tr, "gpsimd", "gpsimd", dst, rd, [(data, r)], api, elements=r[4])
    return ret


def reciprocal(dst=None, data=None, name=None, dtype=None):
    """``dst = 1 / data`` on the Vector engine."""
    api = "reciprocal"
    tr = current()
    dst, data, ret = _one_input(dst, data, dtype, "data", api)
    rd, r = _output_and_input(dst, data, api, "data")
    if tr.numerics:
        with np.errstate(all="ignore"):
            _put(dst, 1.0 / _flat(data))
    _record(tr, "tensor_scalar", "vector", dst, rd, [(data, r)], api)
    return ret


def _pattern(pattern, elements: int, api: str) -> np.ndarray:
    """The affine values ``sum(idx_k * step_k)`` of a ``[[step, num], ...]`` pattern (<= 4-D)."""
    try:
        pairs = [(int(s), int(n)) for s, n in pattern]
    except (TypeError, ValueError):
        raise KernelArgumentError(f"nisa.{api}: pattern must be [[step, num], ...]") from None
    if not 1 <= len(pairs) <= 4 or any(n < 1 for _, n in pairs):
        raise KernelArgumentError(f"nisa.{api}: pattern {pattern!r} must be 1-4 [step, num] pairs")
    if math.prod(n for _, n in pairs) != elements:
        raise HardwareRuleError(
            f"nisa.{api}: the pattern describes {math.prod(n for _, n in pairs)} elements per "
            f"partition; dst holds {elements}"
        )
    v = np.zeros(1, np.int64)
    for s, n in pairs:
        v = (v[:, None] + s * np.arange(n, dtype=np.int64)[None, :]).reshape(-1)
    return v


def iota(dst=None, pattern=None, offset=0, channel_multiplier=0, name=None, expr=None,
         dtype=None, mask=None):  # fmt: skip
    """GpSimd: ``dst[p, ...] = offset + p * channel_multiplier + sum(idx_k * step_k)`` over a
    ``[[step, num], ...]`` pattern, in int32 arithmetic, cast to ``dst``'s dtype. Older form:
    ``iota(expr, dtype)`` of an ``nl.arange`` / ``nl.mgrid`` expression returns a new tile of
    its grid's shape holding the expression's values (grid axis 0 on the partitions)."""
    api = "iota"
    tr = current()
    if isinstance(dst, IndexExpr) or expr is not None:  # iota(expr, dtype) of older editions
        _no_mask(mask, api)
        return _grid_iota(dst if expr is None else expr, pattern if dtype is None else dtype, api)
    if type(dst) is not NkiTensor or pattern is None:
        raise KernelArgumentError(
            f"nisa.{api}: give dst= and pattern=[[step, num], ...] (or, as older editions, an "
            f"nl.arange / nl.mgrid expression and a dtype), not {dst!r}"
        )
    rd = _where(dst, _SBUF, "dst", api)
    v = _pattern(pattern, rd[4], api)
    if tr.numerics:
        p = np.arange(rd[1] - rd[0], dtype=np.int64)[:, None]
        vals = (int(offset) + p * int(channel_multiplier) + v[None, :]).astype(np.int32)
        _put(dst, vals.astype(np.float32))
    _record(tr, "gpsimd", "gpsimd", dst, rd, [], api)


def _grid_axes(e: IndexExpr, shape, what: str, api: str) -> tuple[int, list]:
    """``(channel_multiplier, pattern)`` of expression ``e`` over a grid of ``shape`` (axis 0
    the partitions): its coefficient on each axis, as the instructions' pattern takes them."""
    if e.ndim is not None and e.ndim != len(shape):
        raise KernelArgumentError(
            f"nisa.{api}: {what} runs over a {e.ndim}-axis grid, the tile has {len(shape)} axes"
        )
    for ax, (_, n) in e.terms.items():
        if n > 1 and n != shape[ax]:
            raise KernelArgumentError(
                f"nisa.{api}: {what} has {n} values on grid axis {ax}, the tile {shape[ax]}"
            )
    coeff = [e.terms.get(ax, (0, 1))[0] for ax in range(len(shape))]
    return coeff[0], [[coeff[ax], shape[ax]] for ax in range(1, len(shape))]


def _grid_iota(e, dtype, api: str) -> NkiTensor:
    if not isinstance(e, IndexExpr) or e.ndim is None:
        raise KernelArgumentError(
            f"nisa.{api}(expr, dtype): expr is an nl.arange placed on a grid axis "
            f"(nl.arange(n)[:, None]) or an nl.mgrid expression, not {e!r}"
        )
    if dtype is None:
        raise KernelArgumentError(f"nisa.{api}(expr, dtype): give the dtype of the new tile")
    shape = [1] * e.ndim
    for ax, (_, n) in e.terms.items():
        shape[ax] = n
    if len(shape) < 2:
        shape.append(1)
    out = _new(tuple(shape), dtype, MemoryRegion.sbuf, depth=5)
    cm, pattern = _grid_axes(e, out.shape, "expr", api)
    iota(dst=out, pattern=pattern, offset=e.const, channel_multiplier=cm)
    return out


_CMP = {"<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal"}


def affine_select(dst=None, pattern=None, channel_multiplier=None, on_true_tile=None,
                  on_false_value=None, cmp_op=None, offset=0, name=None, pred=None, dtype=None,
                  mask=None):  # fmt: skip
    """GpSimd: ``dst = on_true_tile where cmp_op(affine, 0) else on_false_value``, with
    ``affine = offset + p * channel_multiplier + sum(idx_k * step_k)`` (a causal mask in one
    instruction). ``cmp_op`` defaults to ``nl.equal``. Older form: ``affine_select(pred,
    on_true_tile, on_false_value)`` with ``pred`` one comparison of index expressions over the
    tile's grid (``iy < ix``) returns a new tile: the same instruction."""
    api = "affine_select"
    if pred is not None or isinstance(dst, Mask):  # the older form
        if pred is None:  # positional: (pred, on_true_tile, on_false_value)
            pred, on_true_tile, on_false_value = dst, pattern, channel_multiplier
        _no_mask(mask, api)
        return _select_by(pred, on_true_tile, on_false_value, dtype, api)
    tr = current()
    dst = _tensor(dst, "dst", api)
    src = _tensor(on_true_tile, "on_true_tile", api)
    cname = "equal" if cmp_op is None else N.name_of(cmp_op, N.ALU, f"nisa.{api} cmp_op")
    rd, r = _output_and_input(dst, src, api, "on_true_tile", _SBUF)
    if not isinstance(on_false_value, numbers.Real):
        raise KernelArgumentError(f"nisa.{api}: on_false_value must be a number")
    if isinstance(channel_multiplier, bool) or not isinstance(channel_multiplier, numbers.Integral):
        raise KernelArgumentError(
            f"nisa.{api}: channel_multiplier (the affine expression's step per partition) must "
            f"be a whole number, not {channel_multiplier!r}"
        )
    v = _pattern(pattern, rd[4], api)
    if tr.numerics:
        p = np.arange(rd[1] - rd[0], dtype=np.int64)[:, None]
        aff = (int(offset) + p * int(channel_multiplier) + v[None, :]).astype(np.float32)
        pred = N.ALU[cname](aff, np.float32(0)) != 0
        _put(dst, np.where(pred, _flat(src), np.float32(on_false_value)))
    _record(tr, "gpsimd", "gpsimd", dst, rd, [(src, r)], api)


def _select_by(pred, on_true_tile, on_false_value, dtype, api: str) -> NkiTensor:
    pred = check_mask(pred, f"nisa.{api}(pred=...)")
    if pred is None or len(pred.terms) != 1:
        raise KernelArgumentError(
            f"nisa.{api}: pred is one comparison of an affine index expression with a number "
            f"(the instruction compares one affine expression with 0); NKI refuses masks joined "
            f"with & or |: select twice, or use nl.where"
        )
    ((e, op, bound),) = pred.terms
    if isinstance(bound, bool) or not isinstance(bound, numbers.Integral):
        raise KernelArgumentError(f"nisa.{api}: pred compares with a whole number, not {bound!r}")
    src = _tensor(on_true_tile, "on_true_tile", api)
    cm, pattern = _grid_axes(e, src.shape, "pred", api)
    out = _new(src.shape, dtype or src.dtype, MemoryRegion.sbuf, depth=5)
    affine_select(out, pattern, cm, src, on_false_value, cmp_op=_CMP[op],
                  offset=e.const - int(bound))  # fmt: skip
    return out


def _no_mask(mask, api: str) -> None:
    """Instructions that take no mask here accept one that holds on their whole grid."""
    whole_grid_only(mask, f"nisa.{api}")


def _stats_form(dst, data, dtype, width: int, api: str):
    """``(dst, data, returned)`` of bn_stats / bn_aggr called as NKI does (``dst=, data=``) or
    in the older value-returning form (``f(data)``: a new ``[P, width]`` SBUF tile of the
    input's dtype unless ``dtype`` is given, as the older API reference says)."""
    if data is None or dst is None:  # f(data) or f(data=data)
        data = _tensor(dst if data is None else data, "data", api)
        dst = _new((data.shape[0], width), dtype or data.dtype, MemoryRegion.sbuf, depth=5)
        return dst, data, dst
    return dst, data, None


def bn_stats(dst=None, data=None, name=None, dtype=None, mask=None):
    """Vector engine: per partition, ``(count, mean, variance * count)`` of the even and of the
    odd elements of ``data`` (at most ``nl.tile_size.bn_stats_fmax`` = 512 per partition), six
    values; :func:`bn_aggr` combines them into mean and variance. Older form:
    ``nisa.bn_stats(data)`` returns a new ``[P, 6]`` tile."""
    api = "bn_stats"
    tr = current()
    _no_mask(mask, api)
    dst, data, ret = _stats_form(dst, data, dtype, 6, api)
    dst = _tensor(dst, "dst", api)
    data = _tensor(data, "data", api)
    rd = _where(dst, _ON_CHIP, "dst", api)
    r = _where(data, _ON_CHIP, "data", api)
    _same_partitions(dst, rd, data, r, api, "dst", "data")
    if r[4] > BN_STATS_FMAX:
        raise TileTooLargeError(
            f"nisa.{api}: data has {r[4]} elements per partition; bn_stats takes at most "
            f"{BN_STATS_FMAX} (nl.tile_size.bn_stats_fmax). Call it per 512-element chunk and "
            f"combine the results with one nisa.bn_aggr."
        )
    if rd[4] != 6:
        raise HardwareRuleError(f"nisa.{api}: dst holds 6 values per partition; got {dst.shape}")
    if tr.numerics:
        x = _flat(data).astype(np.float64)
        out = []
        for part in (x[:, 0::2], x[:, 1::2]):
            n = part.shape[1]
            if n:
                mean = part.mean(axis=1)
                m2 = ((part - mean[:, None]) ** 2).sum(axis=1)
            else:
                mean = m2 = np.zeros(x.shape[0])
            out += [np.full(x.shape[0], n, np.float64), mean, m2]
        _put(dst, np.stack(out, 1))
    _record(tr, "reduce", "vector", dst, rd, [(data, r)], api, elements=r[4])
    return ret


def bn_aggr(dst=None, data=None, name=None, dtype=None, mask=None):
    """Vector engine: combine ``(count, mean, variance * count)`` triples (one or more
    ``bn_stats`` outputs side by side) into ``(mean, variance)`` per partition. Older form:
    ``nisa.bn_aggr(data)`` returns a new ``[P, 2]`` tile."""
    api = "bn_aggr"
    tr = current()
    _no_mask(mask, api)
    dst, data, ret = _stats_form(dst, data, dtype, 2, api)
    dst = _tensor(dst, "dst", api)
    data = _tensor(data, "data", api)
    rd = _where(dst, _ON_CHIP, "dst", api)
    r = _where(data, _ON_CHIP, "data", api)
    _same_partitions(dst, rd, data, r, api, "dst", "data")
    if r[4] % 3:
        raise HardwareRuleError(
            f"nisa.{api}: data holds {r[4]} values per partition; it must be (count, mean, "
            f"variance*count) triples, a multiple of 3"
        )
    if rd[4] != 2:
        raise HardwareRuleError(f"nisa.{api}: dst holds (mean, variance), 2 values per partition")
    if tr.numerics:
        t = _flat(data).astype(np.float64).reshape(data.shape[0], -1, 3)
        cnt, mean, m2 = t[..., 0], t[..., 1], t[..., 2]
        total = cnt.sum(axis=1)
        safe = np.where(total > 0, total, 1.0)
        mu = (cnt * mean).sum(axis=1) / safe
        var = (m2 + cnt * (mean - mu[:, None]) ** 2).sum(axis=1) / safe
        _put(dst, np.stack([mu, var], 1))
    _record(tr, "reduce", "vector", dst, rd, [(data, r)], api, elements=r[4])
    return ret


def _binary_regions(dst, a, b, api: str, wa: str, wb: str) -> tuple[tuple, tuple, tuple]:
    """The on-chip regions of an output ``dst`` and its two tile inputs (named ``wa``, ``wb``),
    checked as :func:`_two_inputs` does."""
    rd = _where(dst, _ON_CHIP, "dst", api)
    ra = _where(a, _ON_CHIP, wa, api)
    rb = _where(b, _ON_CHIP, wb, api)
    _two_inputs(dst, rd, (a, ra, wa), (b, rb, wb), api)
    return rd, ra, rb


def _two_inputs(dst, rd, first, second, api: str) -> None:
    """The two tile inputs ``(tensor, region, name)`` of a Vector instruction: not both in
    PSUM, each on ``dst``'s partitions with ``dst``'s elements per partition."""
    (x, _, wx), (y, _, wy) = first, second
    if x._s.buffer is MemoryRegion.psum and y._s.buffer is MemoryRegion.psum:
        raise OperandPlacementError(
            f"nisa.{api}: {wx} and {wy} are both in PSUM; at most one of them may be (copy "
            f"one to SBUF first)"
        )
    for t, r, w in (first, second):
        _same_partitions(dst, rd, t, r, api, "dst", w)
        _same_elements(rd, r, api, "dst", w)


def _scan_py(a, b, init, f0, f1, rev0, rev1):
    out = np.empty_like(a)
    prev = init
    for j in range(a.shape[1]):
        t = f0(prev, a[:, j]) if rev0 else f0(a[:, j], prev)
        prev = (f1(b[:, j], t) if rev1 else f1(t, b[:, j])).astype(np.float32)
        out[:, j] = prev
    return out


def _is_alu(x) -> bool:
    """Whether ``x`` names an ALU operation (nl.add, np.multiply, "add"...)."""
    try:
        N.name_of(x, N.ALU, "op")
    except (KernelArgumentError, NotModelledError, TypeError):
        return False
    return True


def tensor_tensor_scan(dst=None, data0=None, data1=None, initial=None, op0=None, op1=None,
                       reverse0=False, reverse1=False, name=None, dtype=None):  # fmt: skip
    """Vector engine scan along the free axes: ``dst[:, i] = op1(op0(data0[:, i], dst[:, i-1]),
    data1[:, i])`` from ``initial`` (a number or a ``[P, 1]`` tile): a linear recurrence (a
    selective scan) in one instruction. Older form: ``nisa.tensor_tensor_scan(data0, data1,
    initial, op0, op1)`` returns a new SBUF tile."""
    api = "tensor_tensor_scan"
    tr = current()
    ret = None
    shifted = _is_alu(initial)  # the older form's op0 sits in this form's `initial` slot
    if shifted and op0 is None:  # older: (data0, data1, initial, op0, op1=...)
        data0, data1, initial, op0 = dst, data0, data1, initial
        dst = None
    elif shifted:  # older, positional: (data0, data1, initial, op0, op1[, reverse0...])
        data0, data1, initial, op0, op1, reverse0, reverse1 = (
            dst, data0, data1, initial, op0, op1 if op1 is not None else False, reverse0
        )  # fmt: skip
        dst = None
    elif initial is None and data1 is not None and type(data1) is not NkiTensor:
        data0, data1, initial = dst, data0, data1  # older: (data0, data1, initial, op0=, op1=)
        dst = None
    elif data1 is None:  # older, initial / op0 / op1 by keyword
        data0, data1 = dst, data0
        dst = None
    if dst is None:  # older form: a new tile of the more precise input's dtype (API reference)
        x = _tensor(data0, "data0", api)
        y = _tensor(data1, "data1", api)
        wider = x if x._s.dtype.bits >= y._s.dtype.bits else y
        dst = ret = _new(x.shape, dtype or wider.dtype, MemoryRegion.sbuf, depth=5)
    if data0 is None or data1 is None or initial is None or op0 is None or op1 is None:
        raise KernelArgumentError(
            f"nisa.{api} needs data0, data1, initial, op0 and op1 (and dst, or the older "
            f"form that returns a new tile)"
        )
    dst = _tensor(dst, "dst", api)
    a = _tensor(data0, "data0", api)
    b = _tensor(data1, "data1", api)
    n0 = N.name_of(op0, N.ALU, f"nisa.{api} op0")
    n1 = N.name_of(op1, N.ALU, f"nisa.{api} op1")
    rd, ra, rb = _binary_regions(dst, a, b, api, "data0", "data1")
    iv, it, ir = _scalar_or_vector(initial, ra, "initial", api)
    ins = [(a, ra), (b, rb)] + ([(it, ir)] if it is not None else [])
    if tr.numerics:
        x, y = _flat(a).astype(np.float32), _flat(b).astype(np.float32)
        init = np.full(x.shape[0], iv, np.float32) if it is None else _flat(it)[:, 0].copy()
        if n0 == "multiply" and n1 == "add" and not reverse0:
            from ._scan import linear_scan

            res = linear_scan(x, y, init)
        else:
            with np.errstate(all="ignore"):
                res = _scan_py(x, y, init, N.ALU[n0], N.ALU[n1], reverse0, reverse1)
        _put(dst, res)
    _record(tr, "tensor_tensor_scan", "vector", dst, rd, ins, api)
    return ret


def tensor_copy_predicated(dst=None, src=None, predicate=None, reverse_pred=False, name=None):
    """Vector engine: copy ``src`` (a tile, or a number) into ``dst`` where ``predicate`` is
    nonzero (zero with ``reverse_pred``), leaving ``dst`` as it was elsewhere; ``predicate`` an
    unsigned 8-, 16- or 32-bit tile (or bool_), not in PSUM together with ``src``. Timed as a
    two-input Vector instruction (tensor_tensor's cost) that also reads ``dst`` (an
    assumption: no cost is published)."""
    api = "tensor_copy_predicated"
    tr = current()
    if dst is None or src is None or predicate is None:
        raise KernelArgumentError(f"nisa.{api} needs dst, src and predicate")
    dst, pred = _tensor(dst, "dst", api), _tensor(predicate, "predicate", api)
    if pred.dtype not in ("bool_", "uint8", "uint16", "uint32"):
        raise FormatNotSupportedError(
            f"nisa.{api}: predicate is {pred.dtype}; it must be uint8, uint16 or uint32 (or bool_)"
        )
    rd = _where(dst, _ON_CHIP, "dst", api)
    rp = _where(pred, _ON_CHIP, "predicate", api)
    _same_partitions(dst, rd, pred, rp, api, "dst", "predicate")
    _same_elements(rd, rp, api, "dst", "predicate")
    ins = [(pred, rp), (dst, rd)]
    if type(src) is NkiTensor:
        rs = _where(src, _ON_CHIP, "src", api)
        _two_inputs(dst, rd, (src, rs, "src"), (pred, rp, "predicate"), api)
        if src.dtype != dst.dtype:
            raise FormatNotSupportedError(
                f"nisa.{api}: src is {src.dtype}, dst {dst.dtype}; they must match"
            )
        ins.insert(0, (src, rs))
        value = None
    else:
        value, _, _ = _scalar_or_vector(src, rd, "src", api)
    if tr.numerics:
        keep = _flat(pred) != 0
        keep = ~keep if reverse_pred else keep
        new = _flat(src) if value is None else np.float32(value)
        _put(dst, np.where(keep, new, _flat(dst)))
    _record(tr, "tensor_tensor", "vector", dst, rd, ins, api)


def sequence_bounds(dst=None, segment_ids=None, name=None):
    """GpSimd: for each element of a one-partition tile of segment IDs, the start and (one
    past the) end of the run of equal IDs it belongs to, as ``dst [1, 2, n]`` (starts, then
    ends); ID 0 is padding, whose start is ``n`` and end -1. float32 or int32 tiles. Older form:
    ``sequence_bounds(segment_ids=t)`` returns a new tile. Timed as one GpSimd pass over the IDs
    (an assumption: no cost is published)."""
    api = "sequence_bounds"
    tr = current()
    if segment_ids is None:
        segment_ids, dst = dst, None
    ids = _tensor(segment_ids, "segment_ids", api)
    ri = _where(ids, _SBUF, "segment_ids", api)
    n = ri[4]
    ret = None
    if dst is None:
        dst = ret = _new((1, 2, n), ids.dtype, MemoryRegion.sbuf, depth=5)
    dst = _tensor(dst, "dst", api)
    rd = _where(dst, _SBUF, "dst", api)
    for t, w in ((ids, "segment_ids"), (dst, "dst")):
        if t.dtype not in ("float32", "int32"):
            raise FormatNotSupportedError(
                f"nisa.{api}: {w} is {t.dtype}; it must be float32 or int32"
            )
    if ri[1] - ri[0] != 1 or rd[1] - rd[0] != 1 or rd[4] != 2 * n:
        raise HardwareRuleError(
            f"nisa.{api}: segment_ids must be one partition of n values and dst [1, 2, n] "
            f"(starts, then ends); got {ids.shape} and {dst.shape}"
        )
    if tr.numerics:
        v = _flat(ids)[0].astype(np.float64)
        if (v < 0).any() or (v != np.round(v)).any():
            raise KernelArgumentError(f"nisa.{api}: segment IDs are whole numbers >= 0")
        starts, ends = np.empty(n), np.empty(n)
        for i in range(n):  # a run starts where the ID changes
            starts[i] = starts[i - 1] if i and v[i] == v[i - 1] else i
        for i in range(n - 1, -1, -1):
            ends[i] = ends[i + 1] if i < n - 1 and v[i] == v[i + 1] else i + 1
        pad = v == 0
        starts[pad], ends[pad] = n, -1
        _put(dst, np.concatenate([starts, ends])[None, :])
    _record(tr, "gpsimd", "gpsimd", dst, rd, [(ids, ri)], api, elements=n)
    return ret


def nc_n_gather(dst=None, data=None, indices=None, name=None):
    """GpSimd, within each partition: ``dst[p, j] = data[p, indices[p, j]]``, ``data``'s free
    dimensions flattened; ``indices`` uint32, every tile in SBUF. ``n`` groups of instructions
    in the ISA, ``ceil(elements / 512)``: timed as one GpSimd pass over ``dst`` per group (an
    assumption: no cost is published). ``nl.gather_flattened`` is the same instruction."""
    api = "nc_n_gather"
    tr = current()
    if dst is None or data is None or indices is None:
        raise KernelArgumentError(f"nisa.{api} needs dst, data and indices")
    dst, data, idx = (
        _tensor(t, w, api) for t, w in ((dst, "dst"), (data, "data"), (indices, "indices"))
    )
    rd, r, ri = (
        _where(t, _SBUF, w, api) for t, w in ((dst, "dst"), (data, "data"), (idx, "indices"))
    )
    if idx.dtype != "uint32":
        raise FormatNotSupportedError(f"nisa.{api}: indices are {idx.dtype}; they must be uint32")
    if dst.dtype != data.dtype:
        raise FormatNotSupportedError(
            f"nisa.{api}: dst is {dst.dtype}, data {data.dtype}; they must match"
        )
    _same_partitions(dst, rd, data, r, api, "dst", "data")
    _same_partitions(dst, rd, idx, ri, api, "dst", "indices")
    _same_elements(rd, ri, api, "dst", "indices")
    if tr.numerics:
        j = _flat(idx).astype(np.int64)
        if (j < 0).any() or (j >= r[4]).any():
            bad = int(j[(j < 0) | (j >= r[4])][0])
            raise TileIndexError(
                f"nisa.{api}: index {bad} is outside 0..{r[4] - 1}, the {r[4]} elements of each "
                f"partition of data"
            )
        _put(dst, np.take_along_axis(_flat(data), j, axis=1), data._s.dtype)
    _record(tr, "gpsimd", "gpsimd", dst, rd, [(data, r), (idx, ri)], api, elements=rd[4])


def _random(tr) -> np.random.Generator:
    """The kernel run's random-number generator (nl.rand, dropout): seeded afresh for each run
    and each program of a launch, so a run repeats and the programs differ."""
    return tr.constants.setdefault(
        "rand", np.random.default_rng((0x7E1AB, *map(int, tr.program_id)))
    )


def dropout(dst=None, data=None, prob=None, name=None):
    """Vector engine: each element of ``data`` replaced by 0 with probability ``prob`` (a
    number, or a ``[P, 1]`` tile of one per partition), kept otherwise, into ``dst`` of
    ``data``'s dtype; kept values are not rescaled (the API reference says none). A random
    draw in [0, 1) below ``prob`` drops, so 0 keeps all and 1 (or more) drops all. The draws
    come from the same per-run, per-program generator as ``nl.rand``. Older form:
    ``dropout(data, prob=p)`` returns a new tile. Timed as a one-input Vector pass (an
    assumption)."""
    api = "dropout"
    tr = current()
    ret = None
    if data is None or (type(data) is not NkiTensor and prob is None):
        data, prob = (dst, data) if prob is None else (dst, prob)
        dst = None
    data = _tensor(data, "data", api)
    if prob is None:
        raise KernelArgumentError(f"nisa.{api} needs prob, the probability of dropping")
    if dst is None:
        dst = ret = _new(data.shape, data.dtype, MemoryRegion.sbuf, depth=5)
    dst = _tensor(dst, "dst", api)
    if dst.dtype != data.dtype:
        raise FormatNotSupportedError(
            f"nisa.{api}: dst is {dst.dtype}, data {data.dtype}; they must match"
        )
    rd, r = _output_and_input(dst, data, api, "data")
    pv, pt, pr = _scalar_or_vector(prob, r, "prob", api)
    if pv is not None and pv < 0:
        raise KernelArgumentError(f"nisa.{api}: prob {pv} is a probability, at least 0")
    ins = [(data, r)] + ([(pt, pr)] if pt is not None else [])
    if tr.numerics:
        x = _flat(data)
        drop = _random(tr).random(x.shape) < _vals(pv, pt, True)
        _put(dst, np.where(drop, np.float32(0), x), data._s.dtype)
    _record(tr, "reduce", "vector", dst, rd, ins, api)
    return ret


def nc_stream_shuffle(dst=None, src=None, shuffle_mask=None, name=None):
    """Vector engine: move data across partitions within each quadrant of 32. Output partition
    ``i`` of every quadrant copies input partition ``shuffle_mask[i]`` of the same quadrant
    (255: left as it was); one mask serves every quadrant. ``dst`` may be ``src`` (in place);
    both in SBUF or PSUM, of one dtype and elements per partition. Timed as a copy on the
    Vector engine (no cost is published: an assumption)."""
    api = "nc_stream_shuffle"
    tr = current()
    if dst is None or src is None or shuffle_mask is None:
        raise KernelArgumentError(f"nisa.{api} needs dst, src and shuffle_mask")
    dst, src = _tensor(dst, "dst", api), _tensor(src, "src", api)
    rd, rs = _where(dst, _ON_CHIP, "dst", api), _where(src, _ON_CHIP, "src", api)
    if dst.dtype != src.dtype:
        raise FormatNotSupportedError(
            f"nisa.{api}: dst is {dst.dtype}, src {src.dtype}; they must match"
        )
    _same_elements(rd, rs, api, "dst", "src")
    mask = list(shuffle_mask) if isinstance(shuffle_mask, list | tuple) else None
    if (
        mask is None
        or len(mask) != 32
        or not all(
            isinstance(m, numbers.Integral)
            and not isinstance(m, bool)
            and (0 <= m < 32 or m == 255)
            for m in mask
        )
    ):
        raise KernelArgumentError(
            f"nisa.{api}: shuffle_mask is a list of 32 integers, each a source partition 0..31 "
            f"of the quadrant or 255 (leave that output partition as it was); got {shuffle_mask!r}"
        )
    n_src, n_dst = rs[1] - rs[0], rd[1] - rd[0]
    active = -(-max(n_src, n_dst) // 32) * 32
    starts = {128: (0,), 96: (0,), 64: (0, 64), 32: (0, 32, 64, 96)}[active]
    for start, w in ((rs[0], "src"), (rd[0], "dst")):
        if start not in starts:
            raise HardwareRuleError(
                f"nisa.{api}: {w} starts at partition {start}; with {active} active partitions "
                f"it must start at {' or '.join(map(str, starts))}"
            )
    if tr.numerics:
        x = _flat(src).astype(np.float32).copy()
        out = _flat(dst).astype(np.float32).copy()
        for q in range(0, n_dst, 32):
            for i in range(min(32, n_dst - q)):
                if mask[i] == 255:
                    continue
                p = q + mask[i]
                if p >= n_src:
                    raise HardwareRuleError(
                        f"nisa.{api}: output partition {q + i} copies partition {p} of src, "
                        f"which has {n_src}"
                    )
                out[q + i] = x[p]
        _put(dst, out, dst._s.dtype)
    _record(tr, "copy", "vector", dst, rd, [(src, rs)], api)


def get_nc_version() -> nc_version:
    """The NeuronCore generation the kernel is traced for."""
    return nc_version(current().gen)


def get_nc_sub_version() -> int:
    """The silicon revision within the generation (trnlab models revision 0)."""
    current()
    return 0


#: Free elements per partition one bn_stats takes (NKI API reference: nl.tile_size.bn_stats_fmax).
BN_STATS_FMAX = 512

# Instruction families in modules of their own (they use the helpers above); imported here so
# that nki.isa holds every instruction.
from ._instruction import NkiInstruction, add_dependencies  # noqa: E402
from ._isa_accumulate import (  # noqa: E402, F401
    _vector_regs,
    range_select,
    select_reduce,
    tensor_scalar_cumulative,
)
from ._isa_dma_transpose import dma_transpose  # noqa: E402, F401
from ._isa_gpsimd_cores import local_gather, nonzero_with_count  # noqa: E402, F401
from ._isa_neuroncore_v4 import activate2, exponential  # noqa: E402, F401
from ._isa_tensor_engine import (  # noqa: E402, F401
    _retarget_matmul,
    _retargets,
    nc_matmul,
    nc_matmul_mx,
    nc_transpose,
    quantize_mx,
)
from ._isa_top8 import max8, nc_find_index8, nc_match_replace8  # noqa: E402, F401

_MODELLED = (
    "activate2",
    "activation",
    "activation_reduce",
    "affine_select",
    "bn_aggr",
    "bn_stats",
    "dma_copy",
    "dma_transpose",
    "dropout",
    "exponential",
    "get_nc_sub_version",
    "get_nc_version",
    "iota",
    "local_gather",
    "max8",
    "memset",
    "nc_find_index8",
    "nc_match_replace8",
    "nc_matmul",
    "nc_matmul_mx",
    "nc_n_gather",
    "nc_stream_shuffle",
    "nc_transpose",
    "nonzero_with_count",
    "quantize_mx",
    "range_select",
    "reciprocal",
    "scalar_tensor_tensor",
    "select_reduce",
    "sequence_bounds",
    "tensor_copy",
    "tensor_copy_predicated",
    "tensor_partition_reduce",
    "tensor_reduce",
    "tensor_scalar",
    "tensor_scalar_cumulative",
    "tensor_scalar_reduce",
    "tensor_tensor",
    "tensor_tensor_scan",
)
# The rest of nki.isa (NKI API reference), for "not modelled yet" errors.
_KNOWN = frozenset(
    {
        "rng",
        "set_rng_seed",
        "rand_set_state",
        "rand_get_state",
        "rand2",
        "core_barrier",
        "dma_compute",
        "sendrecv",
        "register_alloc",
        "register_move",
        "register_load",
        "register_store",
        "topk",
        "VirtualRegister",
        "tensor_copy_dynamic_src",
        "tensor_copy_dynamic_dst",
    }
)


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    raise missing("nki.isa", name, _MODELLED, _KNOWN)


# Every instruction can be observed (trnlab.nki._observe): the grader records a learner's
# kernel this way and replays it in a clean process.
_INSTRUCTIONS = [n for n in _MODELLED if n not in ("get_nc_version", "get_nc_sub_version")]
give_masks(globals(), "nisa", _INSTRUCTIONS)
_observe.wrap_module(globals(), "nisa", _INSTRUCTIONS)
# NKI 0.6's instruction handles: what the calls above return; depends_on is observed too, so
# the grader's replay adds the same edges.
_depends_on = _observe.observed("nisa.NkiInstruction.depends_on", add_dependencies)


__all__ = [
    *_MODELLED,
    "NkiInstruction",
    "NkiValidationError",
    "dge_mode",
    "dma_engine",
    "engine",
    "matmul_perf_mode",
    "nc_version",
    "oob_mode",
    "reduce_cmd",
]
