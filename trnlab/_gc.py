"""Pausing Python's cyclic garbage collector while a kernel records.

Recording appends one small tuple per instruction, and each collection of the oldest
generation walks every object alive, including the instructions already recorded and whatever
the notebook holds; with the collector paused, a long recording costs the same per
instruction whatever else is alive. Reference counting still frees everything that is not in a
cycle; the collector resumes (and catches up) when the block ends.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic collector for the block, restoring its state after it (nested uses
    and a collector the caller disabled stay as they were)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
