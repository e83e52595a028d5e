"""Numeric formats of Trainium: facts, quantisers, MX blocks, N:M sparsity.

>>> from trnlab import formats
>>> formats.spec("fp8_e4m3fn").max
448.0
>>> formats.quantize([0.1, 300.0], "fp8_e4m3fn").tolist()
[0.1015625, 288.0]
>>> enc = formats.encode(np.ones((4, 64)), "mxfp4")
>>> enc.codes.shape, enc.scales.shape
((4, 64), (4, 2))

Importing this package compiles nothing and does not import numba; the numba kernels are
compiled on first use and cached on disk.
"""

import numpy as np  # noqa: F401  (used by the doctest above)

from ._errors import FormatError, FormatTypeError
from ._matmul import MatmulResult, matmul
from ._quantize import Encoded, decode, encode, quantize
from ._samples import DISTRIBUTIONS, sample
from ._sparsity import SPARSITY_PATTERNS, PruneResult, prune
from ._specs import (
    E8M0_BIAS,
    E8M0_NAN,
    FloatFormat,
    Format,
    IntFormat,
    MXFormat,
    decode_table,
    facts,
    formats,
    grid,
    spec,
)
from ._throughput import catalog_dtype, throughput

__all__ = [
    "DISTRIBUTIONS",
    "E8M0_BIAS",
    "E8M0_NAN",
    "SPARSITY_PATTERNS",
    "Encoded",
    "FloatFormat",
    "Format",
    "FormatError",
    "FormatTypeError",
    "IntFormat",
    "MXFormat",
    "MatmulResult",
    "PruneResult",
    "catalog_dtype",
    "decode",
    "decode_table",
    "encode",
    "facts",
    "formats",
    "grid",
    "matmul",
    "prune",
    "quantize",
    "sample",
    "spec",
    "throughput",
]
