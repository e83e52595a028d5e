"""Random bits for stochastic rounding: one counter-based 64-bit draw per element.

Element ``i`` of a call seeded with ``seed`` uses ``splitmix64(key + (i + 1) * golden)``, the
(i+1)-th output of the SplitMix64 generator started at ``key`` (Steele, Lea and Flood,
"Fast splittable pseudorandom number generators", OOPSLA 2014). A draw depends only on the seed
and the element's flat index, so results are reproducible whatever the thread count or chunking.

Stochastic rounding rounds ``x`` up to the next grid value with probability
``(x - down) / (up - down)`` and down otherwise, so ``E[round(x)] = x`` (unbiased). Here the
probability is resolved with the dropped bits compared against up to 62 random bits: exact for
every input whose dropped part is at most 62 bits wide, and below 2**-38 of a grid step otherwise
(a value that far under the smallest subnormal always rounds to zero).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["seed_key"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def seed_key(seed: int | np.random.SeedSequence | None) -> np.uint64:
    """A 64-bit key from ``seed``: an int, a SeedSequence, or None for fresh OS entropy."""
    from ._quantize import seed_sequence  # the checks of a seed live with the public API

    seq = seed_sequence(seed) or np.random.SeedSequence()
    return np.uint64(seq.generate_state(1, np.uint64)[0])


@njit(cache=True)
def _draw(key, i):
    """64 random bits for element ``i`` (SplitMix64 output, Steele et al. 2014)."""
    z = key + np.uint64(i + 1) * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))
