"""Test data for format experiments: the distributions a learner meets in real models.

All draws are seeded, so a lab gives the same numbers every run.
"""

from __future__ import annotations

import numpy as np

from trnlab._checks import choose, shape2, whole

from ._errors import FormatError

__all__ = ["DISTRIBUTIONS", "MAX_VALUES", "sample"]

#: The most values one sample holds (2**26 float32 = 256 MiB): a bigger one would not fit a
#: learner's notebook, and no format experiment needs it.
MAX_VALUES = 2**26

DISTRIBUTIONS: dict[str, str] = {
    "gaussian": "N(0, 1): well-behaved activations",
    "heavy_tailed": "Student-t with 3 degrees of freedom: rare large values",
    "outlier_channels": "N(0, 1) with a few channels 30-100x larger, as in LLM activations",
    "weights": "a trained-looking weight matrix: per-row scales, low-rank structure, sparse spikes",
}


def sample(distribution: str, shape: tuple[int, int] = (256, 256), seed: int = 0) -> np.ndarray:
    """Draw a float32 matrix of ``shape`` from one of :data:`DISTRIBUTIONS`.

    Channels are columns (the last axis), so an outlier channel is a column of large values,
    and MX blocks along the last axis see one outlier per block of 32.
    """
    distribution = choose(distribution, DISTRIBUTIONS, "distribution", FormatError)
    rows, cols = shape = shape2(shape, "sample shape", FormatError, max_size=MAX_VALUES)
    seed = whole(seed, "seed", 0, None, FormatError)
    rng = np.random.default_rng(seed)
    if distribution == "gaussian":
        x = rng.standard_normal(shape)
    elif distribution == "heavy_tailed":
        x = rng.standard_t(3, shape)
    elif distribution == "outlier_channels":
        x = rng.standard_normal(shape)
        n_out = max(1, cols // 64)
        channels = rng.choice(cols, n_out, replace=False)
        x[:, channels] *= rng.uniform(30, 100, n_out)
    else:  # weights
        rank = max(1, min(rows, cols) // 16)
        low = rng.standard_normal((rows, rank)) @ rng.standard_normal((rank, cols)) / np.sqrt(rank)
        x = 0.02 * (0.5 * low + rng.standard_normal(shape))
        x *= rng.lognormal(0.0, 0.3, (rows, 1))  # per-output-row scale
        spikes = rng.random(shape) < 1e-3
        x[spikes] *= 20
    return x.astype(np.float32)
