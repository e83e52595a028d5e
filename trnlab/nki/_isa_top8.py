"""The Vector engine's top-8 search: the building block of top-k (MoE routing, sampling).

``max8`` finds the 8 largest values of each partition, ``nc_find_index8`` where given values
first occur, ``nc_match_replace8`` replaces their first occurrences (and says where), each with
the tie rules of the NKI API reference. Their costs are not published: each is timed as one
Vector pass over its input (an assumption, docs/nki.md).
"""

from __future__ import annotations

import numbers

import numpy as np

from trnlab.core import (
    FormatNotSupportedError,
    HardwareRuleError,
    KernelArgumentError,
)

from ._tensor import MemoryRegion, NkiTensor
from ._trace import current
from .isa import (
    _ON_CHIP,
    _flat,
    _new,
    _put,
    _record,
    _same_elements,
    _same_partitions,
    _tensor,
    _where,
)

__all__ = ["max8", "nc_find_index8", "nc_match_replace8"]


#: Elements per partition the top-8 instructions read (NKI API reference: 8 to 16,384).
TOP8_ELEMENTS = (8, 16384)


def _top8_input(x: NkiTensor, what: str, api: str) -> tuple:
    """The region of a top-8 instruction's input and its elements per partition (8..16,384)."""
    r = _where(x, _ON_CHIP, what, api)
    lo, hi = TOP8_ELEMENTS
    if not lo <= r[4] <= hi:
        raise HardwareRuleError(
            f"nisa.{api}: {what} holds {r[4]:,} elements per partition; the instruction reads "
            f"{lo} to {hi:,}"
        )
    return r


def _eight(dst: NkiTensor, r_in: tuple, what: str, api: str) -> tuple:
    rd = _where(dst, _ON_CHIP, what, api)
    if rd[1] - rd[0] != r_in[1] - r_in[0] or rd[4] != 8:
        raise HardwareRuleError(
            f"nisa.{api}: {what} {dst.shape} must be [{r_in[1] - r_in[0]}, 8]: eight values per "
            f"partition of the input"
        )
    return rd


def _all_ones(t: NkiTensor) -> float:
    """The not-found index: all bits set in the index tile's type (0xFFFF, 0xFFFFFFFF)."""
    return float(t._s.dtype.hi) if t._s.dtype.kind == "int" else float(2**32 - 1)


def max8(dst=None, src=None, name=None, dtype=None):
    """The 8 largest values of each partition of ``src`` (up to 3-D, 8 to 16,384 elements per
    partition, read as fp32), in descending order, into ``dst [P, 8]`` on the Vector engine;
    duplicates count once each. Older form: ``max8(src=t)`` returns a new ``[P, 8]`` tile.
    Timed as one Vector pass over the input (no cost is published: an assumption)."""
    api = "max8"
    tr = current()
    ret = None
    if src is None:
        src, dst = dst, None
    src = _tensor(src, "src", api)
    if dst is None:
        dst = ret = _new((src.shape[0], 8), dtype or src.dtype, MemoryRegion.sbuf, depth=5)
    dst = _tensor(dst, "dst", api)
    r = _top8_input(src, "src", api)
    rd = _eight(dst, r, "dst", api)
    if tr.numerics:
        x = _flat(src).astype(np.float32)
        _put(dst, -np.sort(-x, axis=1)[:, :8])
    _record(tr, "reduce", "vector", dst, rd, [(src, r)], api, elements=r[4])
    return ret


def _claim(row: np.ndarray, val: float, taken: np.ndarray) -> int:
    """The first position of ``val`` in ``row`` not already taken, or -1."""
    hits = np.flatnonzero((row == val) & ~taken)
    if hits.size == 0:
        return -1
    taken[hits[0]] = True
    return int(hits[0])


def nc_find_index8(dst=None, data=None, vals=None, name=None, dtype=None):
    """For each of the 8 ``vals`` of a partition, the index of its first occurrence in that
    partition of ``data`` (up to 3-D, flattened; 8 to 16,384 elements), on the Vector engine;
    equal vals take successive occurrences in ascending order; a value not found gives all
    ones (0xFFFF / 0xFFFFFFFF). ``dst`` is uint16 or uint32 ``[P, 8]``; older form:
    ``nc_find_index8(data=, vals=)`` returns a new uint32 tile. Timed as one Vector pass over
    ``data`` (an assumption)."""
    api = "nc_find_index8"
    tr = current()
    ret = None
    if data is None or vals is None:  # older: (data, vals) positional or by keyword
        if data is None and vals is None:
            raise KernelArgumentError(f"nisa.{api} needs data and vals")
        if vals is None:
            data, vals = dst, data
        dst = None
    data, vals = _tensor(data, "data", api), _tensor(vals, "vals", api)
    if dst is None:
        dst = ret = _new((data.shape[0], 8), dtype or "uint32", MemoryRegion.sbuf, depth=5)
    dst = _tensor(dst, "dst", api)
    if dst.dtype not in ("uint16", "uint32"):
        raise FormatNotSupportedError(
            f"nisa.{api}: dst is {dst.dtype}; it must be uint16 or uint32"
        )
    r = _top8_input(data, "data", api)
    rv = _eight(vals, r, "vals", api)
    rd = _eight(dst, r, "dst", api)
    if tr.numerics:
        x, v = _flat(data).astype(np.float32), _flat(vals).astype(np.float32)
        out = np.empty((x.shape[0], 8), np.float64)
        for p in range(x.shape[0]):
            taken = np.zeros(x.shape[1], bool)
            for i in range(8):
                k = _claim(x[p], v[p, i], taken)
                out[p, i] = _all_ones(dst) if k < 0 else k
        _put(dst, out)
    _record(tr, "reduce", "vector", dst, rd, [(data, r), (vals, rv)], api, elements=r[4])
    return ret


def nc_match_replace8(dst=None, data=None, vals=None, imm=None, dst_idx=None, name=None,
                      dtype=None):  # fmt: skip
    """``data`` with the first occurrence of each of the 8 ``vals`` of a partition replaced by
    ``imm``, into ``dst`` (Vector engine); with ``dst_idx`` ``[P, 8]``, the positions matched.
    The vals are taken from the last to the first, each matching the first occurrence not yet
    replaced, so equal vals pair with successive occurrences in descending slots (the API
    reference's rule); a value not found leaves ``data`` and gives an all-ones index (an
    assumption: the reference does not say). Older form: ``nc_match_replace8(data=, vals=,
    imm=, dst_idx=)`` returns a new tile. Timed as one Vector pass over ``data`` and a short
    write of the indices (an assumption)."""
    api = "nc_match_replace8"
    tr = current()
    ret = None
    if data is None:
        raise KernelArgumentError(f"nisa.{api} needs data, vals and imm")
    data = _tensor(data, "data", api)
    if vals is None or imm is None:
        raise KernelArgumentError(f"nisa.{api} needs vals and imm (the value to write)")
    if not isinstance(imm, numbers.Real) or isinstance(imm, bool):
        raise KernelArgumentError(f"nisa.{api}: imm must be a number, not {imm!r}")
    vals = _tensor(vals, "vals", api)
    if dst is None:
        dst = ret = _new(data.shape, dtype or data.dtype, MemoryRegion.sbuf, depth=5)
    dst = _tensor(dst, "dst", api)
    r = _top8_input(data, "data", api)
    rv = _eight(vals, r, "vals", api)
    rd = _where(dst, _ON_CHIP, "dst", api)
    _same_partitions(dst, rd, data, r, api, "dst", "data")
    _same_elements(rd, r, api, "dst", "data")
    idx = ri = None
    if dst_idx is not None:
        idx = _tensor(dst_idx, "dst_idx", api)
        ri = _eight(idx, r, "dst_idx", api)
    if tr.numerics:
        x, v = _flat(data).astype(np.float32).copy(), _flat(vals).astype(np.float32)
        found = np.empty((x.shape[0], 8), np.float64)
        none = _all_ones(idx) if idx is not None else 0.0
        for p in range(x.shape[0]):
            done = np.zeros(x.shape[1], bool)
            for i in range(7, -1, -1):
                k = _claim(x[p], v[p, i], done)
                found[p, i] = none if k < 0 else k
            x[p, done] = np.float32(imm)
        _put(dst, x)
        if idx is not None:
            _put(idx, found)
    _record(tr, "reduce", "vector", dst, rd, [(data, r), (vals, rv)], api, elements=r[4])
    if idx is not None:
        _record(tr, "copy", "vector", idx, ri, [(dst, rd)], api, elements=8)
    return ret
