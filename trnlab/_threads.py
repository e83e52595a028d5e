"""Run small linear algebra on one BLAS thread.

For the matrix sizes of an interactive dashboard (up to a few hundred on a side) a
multi-threaded BLAS costs more in wake-ups than it saves, and on a busy 2-core machine it
oversubscribes the cores: a 128^3 float32 matmul measured 5.4 ms on two OpenBLAS threads
against 0.07 ms on one. Large problems keep every thread.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from functools import lru_cache

__all__ = ["SMALL_MACS", "blas_threads_for", "one_blas_thread"]

#: Multiply-accumulates below which one BLAS thread is faster (512^3 / 8).
SMALL_MACS = 2**24


@lru_cache(maxsize=1)
def _controller():
    from threadpoolctl import ThreadpoolController  # inspects the loaded BLAS once

    return ThreadpoolController()


def one_blas_thread() -> AbstractContextManager:
    """A context in which BLAS runs on one thread."""
    return _controller().limit(limits=1, user_api="blas")


def blas_threads_for(macs: float) -> AbstractContextManager:
    """A context that limits BLAS to one thread when ``macs`` is small, else does nothing."""
    return nullcontext() if macs >= SMALL_MACS else one_blas_thread()
