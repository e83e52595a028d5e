"""Reference kernels written in the ``trnlab.core`` kernel API.

The matmul progression (``tiled`` -> ``hoisted`` -> ``blocked_mn`` -> ``blocked_mnk`` ->
``pipelined``), a matmul with a fused bias + activation epilogue, and a Tensor Engine transpose.

>>> import numpy as np
>>> from trnlab import kernels
>>> a, b = np.ones((200, 300)), np.ones((300, 100))
>>> run = kernels.matmul(a, b, variant="tiled", dtype="bf16")
>>> float(run.output[0, 0]), run.output.shape
(300.0, (200, 100))
"""

from ._api import matmul, matmul_bias_act, transpose
from ._epilogue import matmul_bias_act_kernel
from ._matmul import VARIANTS, blocked_mn, blocked_mnk, hoisted, pipelined, tiled
from ._transpose import transpose_kernel

__all__ = [
    "VARIANTS",
    "blocked_mn",
    "blocked_mnk",
    "hoisted",
    "matmul",
    "matmul_bias_act",
    "matmul_bias_act_kernel",
    "pipelined",
    "tiled",
    "transpose",
    "transpose_kernel",
]
