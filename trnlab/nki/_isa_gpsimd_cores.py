"""Instructions that work core by core on the GpSimd engine, each of whose eight cores reaches
16 contiguous SBUF partitions: ``local_gather`` and ``nonzero_with_count``.

``local_gather``: each core reads the indices in its 16 partitions of ``index``, flattened
partition first (a column-major flatten of the ``[16, n]`` slice), keeps the first
``num_valid_indices``, and for every one of its partitions copies ``num_elem_per_idx``
contiguous elements starting at each index (an element offset into the partition's flattened
free axis) to the output, in index order: ``dst[p, j, e] = src[p, idx_core(p)[j] + e]``. That
is the NKI reference's numpy semantics (nki/test/test_nki_isa_local_gather.py).

``nonzero_with_count`` (NeuronCore-v3+): each core reads only its first partition (0, 16, ...
112) and writes there the positions of its nonzero elements (plus ``index_offset``), then
``padding_val`` up to the input's length, then how many it found; the other partitions of
``dst`` keep what they held. MoE routing uses it to list the tokens an expert got.

Neither cost is published: each is timed as one GpSimd pass over the elements it writes (an
assumption, docs/nki.md).
"""

from __future__ import annotations

import numbers

import numpy as np

from trnlab.core import FormatNotSupportedError, HardwareRuleError, KernelArgumentError

from ._tensor import NkiTensor
from ._trace import current
from .isa import _SBUF, _flat, _new, _put, _record, _tensor, _where

__all__ = ["local_gather", "nonzero_with_count"]

#: Partitions one GpSimd core reaches.
CORE_PARTITIONS = 16
#: Contiguous elements a gather may take per index (NKI reference).
RUNS = (1, 2, 4, 8, 16, 32)
#: Indices one core may gather.
MAX_INDICES = 4096


def _whole(v, what: str, api: str) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise KernelArgumentError(f"nisa.{api}: {what} must be a whole number, not {v!r}")
    return int(v)


def local_gather(dst=None, src_buffer=None, index=None, num_elem_per_idx=None,
                 num_valid_indices=None, name=None):  # fmt: skip
    """GpSimd: ``dst[p, j, e] = src_buffer[p, idx[j] + e]`` with ``idx`` the flattened indices
    (uint16, partition first) of the 16-partition slice of ``index`` that holds ``p`` (see the
    module); ``num_elem_per_idx`` 1 unless given. Older form ``local_gather(src_buffer, index,
    num_elem_per_idx, num_valid_indices)``: returns a new ``[P, num_valid_indices,
    num_elem_per_idx]`` tile."""
    api = "local_gather"
    tr = current()
    ret = None
    if index is not None and type(index) is not NkiTensor:  # older: (src, index, k[, n])
        dst, src_buffer, index, num_elem_per_idx, num_valid_indices = (
            None, dst, src_buffer, index, num_elem_per_idx,
        )  # fmt: skip
    elif index is None and type(dst) is NkiTensor and type(src_buffer) is NkiTensor:
        dst, src_buffer, index = None, dst, src_buffer  # older: (src, index)
    if src_buffer is None or index is None:
        raise KernelArgumentError(f"nisa.{api} needs src_buffer and index")
    src = _tensor(src_buffer, "src_buffer", api)
    idx = _tensor(index, "index", api)
    rs = _where(src, _SBUF, "src_buffer", api)
    ri = _where(idx, _SBUF, "index", api)
    parts = rs[1] - rs[0]
    if ri[1] - ri[0] != parts or parts % CORE_PARTITIONS:
        raise HardwareRuleError(
            f"nisa.{api}: src_buffer spans {parts} partitions and index {ri[1] - ri[0]}; they "
            f"must match and be a multiple of {CORE_PARTITIONS} (each GpSimd core gathers "
            f"within its own 16 partitions)"
        )
    if idx.dtype != "uint16":
        raise FormatNotSupportedError(f"nisa.{api}: index is {idx.dtype}; it must be uint16")
    k = 1 if num_elem_per_idx is None else _whole(num_elem_per_idx, "num_elem_per_idx", api)
    if k not in RUNS:
        raise HardwareRuleError(
            f"nisa.{api}: num_elem_per_idx={k}; a gather takes {', '.join(map(str, RUNS))} "
            f"contiguous elements per index"
        )
    per_core = CORE_PARTITIONS * ri[4]
    n = (
        per_core
        if num_valid_indices is None
        else _whole(num_valid_indices, "num_valid_indices", api)
    )
    if not 1 <= n <= min(per_core, MAX_INDICES):
        raise HardwareRuleError(
            f"nisa.{api}: num_valid_indices={n}; each core holds {per_core} indices in its 16 "
            f"partitions of index and gathers at most {MAX_INDICES}"
        )
    if dst is None:
        dst = ret = _new((parts, n, k), src.dtype, src._s.buffer)
    dst = _tensor(dst, "dst", api)
    rd = _where(dst, _SBUF, "dst", api)
    if dst.dtype != src.dtype:
        raise FormatNotSupportedError(
            f"nisa.{api}: dst is {dst.dtype}, src_buffer {src.dtype}; the gather keeps the "
            f"type (no cast)"
        )
    if rd[1] - rd[0] != parts or rd[4] != n * k:
        raise HardwareRuleError(
            f"nisa.{api}: dst {dst.shape} must hold {parts} partitions of {n} x {k} gathered "
            f"elements"
        )
    if tr.numerics:
        data, ix = _flat(src), _flat(idx).astype(np.int64)
        out = np.empty((parts, n, k), np.float32)
        for c in range(0, parts, CORE_PARTITIONS):
            flat = ix[c : c + CORE_PARTITIONS].flatten(order="F")[:n]
            if (flat < 0).any() or (flat + k > rs[4]).any():
                bad = int(flat[(flat < 0) | (flat + k > rs[4])][0])
                raise HardwareRuleError(
                    f"nisa.{api}: index {bad} (core {c // CORE_PARTITIONS}) reads elements "
                    f"{bad}..{bad + k - 1}, past the {rs[4]} of each partition of src_buffer "
                    f"(undefined on the device, refused here)"
                )
            take = flat[:, None] + np.arange(k)[None, :]
            out[c : c + CORE_PARTITIONS] = data[c : c + CORE_PARTITIONS][:, take]
        _put(dst, out, src._s.dtype)
    _record(tr, "gpsimd", "gpsimd", dst, rd, [(src, rs), (idx, ri)], api, elements=n * k)
    return ret


def nonzero_with_count(dst=None, src=None, index_offset=0, padding_val=-1, name=None):
    """GpSimd (NeuronCore-v3+), on partitions 0, 16, ... 112 only: ``dst[p]`` = the positions
    of ``src[p]``'s nonzero elements plus ``index_offset``, then ``padding_val`` up to
    ``src``'s length, then their count (``dst`` one element longer than ``src``, int32;
    ``src`` float32 or int32). Other partitions of ``dst`` keep what they held."""
    api = "nonzero_with_count"
    tr = current()
    if tr.gen < 3:
        raise HardwareRuleError(
            f"nisa.{api} exists on NeuronCore-v3 (trn2) and later, not on {tr.params.name} "
            f"({tr.params.chip})"
        )
    if dst is None or src is None:
        raise KernelArgumentError(f"nisa.{api} needs dst and src")
    dst, src = _tensor(dst, "dst", api), _tensor(src, "src", api)
    if len(src.shape) != 2 or len(dst.shape) != 2:
        raise HardwareRuleError(
            f"nisa.{api}: src {src.shape} and dst {dst.shape} must be 2-D ([partitions, n] and "
            f"[partitions, n + 1])"
        )
    rs = _where(src, _SBUF, "src", api)
    rd = _where(dst, _SBUF, "dst", api)
    if rd[1] - rd[0] != rs[1] - rs[0] or rd[4] != rs[4] + 1:
        raise HardwareRuleError(
            f"nisa.{api}: dst {dst.shape} must have src's {rs[1] - rs[0]} partitions and one "
            f"more element than src's {rs[4]} (the count)"
        )
    if src.dtype not in ("float32", "int32") or dst.dtype != "int32":
        raise FormatNotSupportedError(
            f"nisa.{api}: src is {src.dtype} and dst {dst.dtype}; src must be float32 or int32 "
            f"and dst int32"
        )
    offset = _whole(index_offset, "index_offset", api)
    pad = _whole(padding_val, "padding_val", api)
    if tr.numerics:
        data, out = _flat(src), dst._arr()
        for p in range(rs[0], rs[1]):
            if p % CORE_PARTITIONS:
                continue  # only each core's first partition is read and written
            row = data[p - rs[0]]
            found = np.flatnonzero(row != 0)
            values = np.full(rs[4] + 1, pad, np.int64)
            values[: len(found)] = found + offset
            values[-1] = len(found)
            out[p - rs[0]] = values
    _record(tr, "gpsimd", "gpsimd", dst, rd, [(src, rs)], api, elements=rs[4] + 1)
