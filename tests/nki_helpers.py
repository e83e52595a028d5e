"""Helpers shared by the trnlab.nki tests."""

from __future__ import annotations

import trnlab.nki.language as nl


def store_all(*tiles):
    """Inside a kernel: a new shared_hbm output per tile, each stored by one DMA."""
    outs = []
    for t in tiles:
        o = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
        nl.store(o, t)
        outs.append(o)
    return tuple(outs)
