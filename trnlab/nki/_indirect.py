"""Indirect (data-dependent) DMA: ``t[idx_tile, ...]``, rows of an HBM tensor chosen at run time.

NKI's older editions gather and scatter rows of an HBM tensor through an on-chip tile of row
indices, one per partition: ``nl.load(data[idx_tile, i_f])`` reads row ``idx_tile[p]`` of
``data`` into partition ``p`` of a new tile, ``nl.store(data[idx_tile, i_f], value=t)`` writes
partition ``p`` of ``t`` to that row, and ``nisa.dma_copy`` takes the same views. The indices
have to be in SBUF (the DMA's descriptors are made from them by software DGE on GpSimd); an
index outside the tensor is an error unless ``oob_mode=nisa.oob_mode.skip`` drops its row.

:class:`IndirectView` is what indexing an HBM tensor by a tile returns; ``nisa.dma_copy``
(``trnlab.nki.isa``) moves it.
"""

from __future__ import annotations

from trnlab.core import KernelArgumentError

from ._errors import NotModelledError

__all__ = ["IndirectView"]


class IndirectView:
    """``base[idx, *rest]``: row ``idx[p]`` of HBM tensor ``base`` (its first dimension),
    narrowed by ``rest``, for each partition ``p`` of the on-chip index tile ``idx``."""

    def __init__(self, base, idx, rest: tuple):
        from ._tensor import NkiTensor

        if base._s.on_chip:
            raise NotModelledError(
                f"indexing on-chip tile {base.name!r} by the values of tile {idx.name!r} "
                f"(NeuronCore-v4's .indirect views) is not modelled yet in trnlab.nki; an "
                f"indirect DMA gathers rows of an HBM tensor"
            )
        if type(idx) is not NkiTensor or not idx._s.on_chip:
            raise KernelArgumentError(
                f"the indices of an indirect DMA into {base.name!r} must be an on-chip [P, 1] "
                f"tile (the DMA's descriptors are made from SBUF); load them first"
            )
        if any(type(k) is NkiTensor for k in rest):
            raise NotModelledError(
                f"indexing {base.name!r} by tile values in a dimension other than the first is "
                f"not modelled yet in trnlab.nki; an indirect DMA chooses rows"
            )
        self.base, self.idx, self.rest = base, idx, tuple(rest)
        self.row_elements = self.row(0).size
        self.shape = (idx.shape[0], self.row_elements)
        self.dtype = base.dtype

    def row(self, r: int):
        """The view of row ``r`` of ``base`` that partition ``p`` reads or writes. With a
        dense nl.mgrid grid the partition axis appears in it with stride 0 (the grid's first
        expression, the row, was replaced by the index): one row, not one per partition."""
        view = self.base[(int(r), *self.rest)]
        if any(s == 0 and n > 1 for n, s in zip(view.shape, view.strides, strict=True)):
            view = view[tuple(slice(0, 1) if s == 0 else slice(None) for s in view.strides)]
        return view

    @property
    def name(self) -> str:
        return f"{self.base.name}[{self.idx.name}, ...]"

    def __repr__(self) -> str:
        return f"IndirectView({self.name}, shape={self.shape})"
