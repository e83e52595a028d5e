"""``nisa.dma_transpose``: a transpose done by the DMA engines on the way, not by the Tensor
Engine.

The Trainium2 guide describes two flows, HBM to SBUF (a K cache laid out ``[seq, d_head]`` in
HBM arriving with ``d_head`` on the partitions, as the Tensor Engine wants it) and SBUF to SBUF
(a partition/free swap that leaves the Tensor Engine, and the PSUM copy after it, free). The
16 DMA engines cooperate on one transpose and reach up to 90% of a copy's throughput from HBM
and 50% from SBUF; :meth:`trnlab.core.KernelContext.dma_transpose` charges it so. The
permutation follows NKI's reference: a 2-D source is transposed ``(1, 0)``, 3-D ``(2, 1, 0)``,
4-D ``(3, 1, 2, 0)``: the source's last axis always becomes the destination's first (its
partitions, for an SBUF destination). The indirect form (a source ``.ap(vector_offset=...)``,
software DGE) is not modelled.
"""

from __future__ import annotations

import numpy as np

from trnlab.core import HardwareRuleError

from ._errors import NotModelledError
from ._tensor import MemoryRegion
from ._trace import current
from .isa import (
    _DGE,
    _dma_sbuf_side,
    _hwdge_rules,
    _new,
    _put,
    _ref,
    _tensor,
    dge_mode,
    oob_mode,
)

__all__ = ["dma_transpose"]

#: The one permutation NKI's reference gives each rank.
PERMUTATIONS = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}
_DIRECT_MODES = (dge_mode.unknown, dge_mode.none, dge_mode.hwdge)


def _permutation(src, axes, api: str) -> tuple[int, ...]:
    perm = PERMUTATIONS.get(len(src.shape))
    if perm is None:
        raise HardwareRuleError(
            f"nisa.{api}: src {src.shape} has {len(src.shape)} dimensions; a DMA transpose takes "
            f"2-D, 3-D or 4-D tensors"
        )
    if axes is not None and tuple(axes) != perm:
        raise HardwareRuleError(
            f"nisa.{api}: axes={tuple(axes)} for a {len(src.shape)}-D source; NKI supports only "
            f"{perm} (the source's last axis becomes the destination's first)"
        )
    return perm


def _hwdge_shape(src, api: str) -> None:
    """The hardware DGE's limits on a transpose (NKI 0.6 reference)."""
    shape = src.shape
    if len(shape) == 2:
        ok = shape[0] == 16
        rule = "a 2-D source must have exactly 16 rows"
    else:
        ok = shape[0] in (1, 2, 4, 8, 16) and (shape[0] * shape[-2]) % 16 == 0
        rule = (
            "a 3-D or 4-D source's first dimension must be 1, 2, 4, 8 or 16, and it times the "
            "second-to-last a multiple of 16"
        )
    if not ok or shape[-1] > 128:
        raise HardwareRuleError(
            f"nisa.{api}: src {shape} with dge_mode=hwdge: {rule}, and its last dimension at "
            f"most 128. Leave dge_mode unset for other shapes"
        )


def dma_transpose(dst=None, src=None, axes=None, priority=None, dge_mode=dge_mode.unknown,
                  oob_mode=oob_mode.error, name=None, dtype=None):  # fmt: skip
    """Transpose ``src`` into ``dst`` with the DMA engines (NeuronCore-v3+): ``dst`` must have
    ``src``'s shape permuted as NKI's reference says (2-D ``(1, 0)``, 3-D ``(2, 1, 0)``, 4-D
    ``(3, 1, 2, 0)``); ``src`` of 2 or 4 bytes per element (the Trainium2 guide: bit-accurate
    for both), cast to ``dst``'s dtype if it differs (not with hwdge, which moves raw bytes).
    ``src`` in HBM or SBUF, ``dst`` in SBUF (or HBM). Older form ``dma_transpose(src,
    dtype=...)``: returns a new SBUF tile."""
    api = "dma_transpose"
    tr = current()
    if src is None and dst is not None:  # older form: dma_transpose(src, ...)
        dst, src = None, dst
    src = _tensor(src, "src", api)
    p = tr.params
    if p.dma_transpose_hbm_share <= 0:
        raise HardwareRuleError(
            f"nisa.{api}: {p.name} ({p.chip}) has no DMA transpose in trnlab's catalogue (the "
            f"Trainium2 guide introduces it; the Trainium/Inferentia2 guide describes none). "
            f"Transpose on the Tensor Engine (nisa.nc_transpose into PSUM, then copy to SBUF), "
            f"or pick trn2 or trn3"
        )
    if priority is not None:
        raise NotModelledError(f"nisa.{api}: priority (DMA quality of service)")
    if oob_mode is not globals()["oob_mode"].error:
        raise HardwareRuleError(
            f"nisa.{api}: oob_mode={oob_mode} is valid only when src uses indirect indexing "
            f"(NKI's reference); a direct transpose has no out-of-bounds rows to skip"
        )
    if dge_mode not in _DIRECT_MODES:
        raise HardwareRuleError(
            f"nisa.{api}: dge_mode={dge_mode}: a direct DMA transpose takes dge_mode unknown "
            f"(the default), none or hwdge (the DGE guide); swdge makes the indirect form's "
            f"descriptors, which trnlab does not model"
        )
    perm = _permutation(src, axes, api)
    shape = tuple(src.shape[i] for i in perm)
    if dst is None:  # older form: a new tile, cast to dtype if given (its API reference)
        dst = _new(shape, src.dtype if dtype is None else dtype, MemoryRegion.sbuf)
        ret = dst
    else:
        ret = None
    dst = _tensor(dst, "dst", api)
    if tuple(dst.shape) != shape:
        raise HardwareRuleError(
            f"nisa.{api}: dst {tuple(dst.shape)} must be src {tuple(src.shape)} transposed "
            f"{perm}: {shape} (NKI enforces the exact shape and rank since 0.6)"
        )
    bits = src._s.dtype.bits
    if bits not in (16, 32):
        raise HardwareRuleError(
            f"nisa.{api}: {src.dtype} is {bits}-bit; the DMA engines transpose 2- and 4-byte "
            f"elements (the Trainium2 guide). Transpose {src.dtype} data on the Tensor Engine, "
            f"or move it as a wider type"
        )
    if dge_mode is globals()["dge_mode"].hwdge:
        _hwdge_rules(tr, dst, src, api)
        if bits != 16:
            raise HardwareRuleError(
                f"nisa.{api}: dge_mode=hwdge transposes 2-byte elements only; {src.dtype} is "
                f"{bits // 8} bytes. Leave dge_mode unset"
            )
        _hwdge_shape(src, api)
    if dst._s.buffer is MemoryRegion.psum or src._s.buffer is MemoryRegion.psum:
        raise HardwareRuleError(
            f"nisa.{api}: the DMA engines reach HBM and SBUF, not PSUM; copy the PSUM tile to "
            f"SBUF first"
        )
    refs, storages, exact = [], [], True
    for x, what in ((dst, "dst"), (src, "src")):
        if x._s.on_chip:
            r = _dma_sbuf_side(x, what, api)
            exact = exact and r[3] - r[2] == r[4]
            refs.append(_ref(x, r))
            storages.append(x._s)
        else:
            *rh, e = x._hbm_region()
            exact = exact and e
            refs.append((x._s, *rh))
    if not dst._s.on_chip:
        if dst._s.frozen:
            raise NotModelledError(f"nisa.{api}: writing {dst._s.name!r}: {dst._s.frozen}")
        dst._s.stored = True
    if tr.numerics:  # rounded to dst's dtype where the older form's dtype= casts
        _put(dst, np.transpose(src._arr(), perm), src._s.dtype if dst.dtype == src.dtype else None)
    n = None if exact else dst.size
    tr.add(("dma_transpose", refs[0], refs[1], _DGE[dge_mode], n), api, *storages)
    return ret
