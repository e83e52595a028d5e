"""Pausing Python's cyclic garbage collector while a kernel records.

Recording appends one small tuple per instruction, and each collection of the oldest
generation walks every object alive, including the instructions already recorded and whatever
the notebook holds; with the collector paused, a long recording costs the same per
instruction whatever else is alive. Reference counting still frees everything that is not in a
cycle; the collector resumes (and catches up) when the block ends.

The catch-up is a collection of the youngest generation, which walks every container made
since the last collection and still alive, item by item. The recording's row list (made with
its context just before the block, and holding 22 integers per instruction by its end) would
be one of them: a recording of 102,400 instructions in 0.21 s spent a further 20 ms walking
it. So the pause begins by collecting the youngest generation (usually a few hundred objects),
which moves what exists then (the context, its row list) to the middle one; the catch-up then
walks only what the block made, unless it falls on the collection that also takes the middle
generation (one in ten). Not the middle one too: each such collection counts towards a full
one, which walks everything the notebook holds (a dashboard's control change went from 36 to
95-120 ms at worst).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic collector for the block, restoring its state after it (nested uses
    and a collector the caller disabled stay as they were, and are not collected)."""
    was = gc.isenabled()
    if was:
        gc.collect(0)  # the youngest generation only (above)
        gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
