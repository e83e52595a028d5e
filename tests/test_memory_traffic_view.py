"""MemoryTraffic: the HBM heat maps and the bytes table of a finished run say what the kernel
moved (a tensor loaded twice reads 2.0x, in the picture's titles, its cells and the table)."""

from __future__ import annotations

import numpy as np
import pytest

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl
from trnlab._errors import TrnlabTypeError
from trnlab.widgets import MemoryTraffic


@nki.jit
def double_then_store(x):
    """x loaded twice (the second load overwrites the first), y stored once."""
    R, C = x.shape
    y = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.add)
    nisa.dma_copy(dst=y, src=t)
    return y


def _run():
    x = np.ones((128, 256), np.float32)
    return nki.profile(double_then_store, chip="trn1")(x)


def test_the_picture_and_the_table_say_what_crossed_hbm():
    view = MemoryTraffic(_run(), "a kernel that loads x twice")
    titles = [a.text for a in view.chart.fig.layout.annotations]
    assert titles == ["x (loads: 2.0x)", "y (stores: 1.0x)"]
    heat_x, heat_y = view.chart.fig.data[0], view.chart.fig.data[1]
    assert np.all(np.asarray(heat_x.z) == 2) and np.all(np.asarray(heat_y.z) == 1)
    text = view.summary_text()
    assert "x | 128 KiB | 256 KiB | 0 B | 2.0x | 2" in text
    assert "y | 128 KiB | 0 B | 128 KiB | 1.0x | 1" in text
    assert "HBM → SBUF 256 KiB" in text and "SBUF → HBM 128 KiB" in text
    assert "a kernel that loads x twice" in view.chart.fig.layout.title.text
    assert "MemoryTraffic" in view.static_html()


def test_without_structure_only_what_crossed_hbm_is_shown():
    """A reference solution shown as the target before a learner's try: the HBM bytes and how
    often each tensor crossed, not the transfers or the on-chip paths that say how it is built."""
    run = _run()
    view = MemoryTraffic(run, "the reference solution", structure=False)
    text = view.summary_text()
    assert "x | 128 KiB | 256 KiB | 0 B | 2.0x | -" in text
    assert "HBM → SBUF" not in text and "shown once your own kernel has run" in text
    titles = [a.text for a in view.chart.fig.layout.annotations]
    assert titles == ["x (loads: 2.0x)", "y (stores: 1.0x)"]  # the target stays in the picture
    with pytest.raises(TrnlabTypeError, match="flag"):
        MemoryTraffic(run, structure="no")


def test_anything_but_a_run_is_refused_saying_what_it_takes():
    with pytest.raises(TrnlabTypeError, match=r"core.Run .* not dict"):
        MemoryTraffic({})
