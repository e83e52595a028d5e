"""Reference kernels, written in NKI on :mod:`trnlab.nki` (one source of truth).

The matmul progression (:data:`VARIANTS`: ``tiled`` -> ``hoisted`` -> ``blocked_mn`` ->
``blocked_mnk`` -> ``pipelined``), a matmul with a fused bias + activation epilogue,
transposes, an SPMD tensor add, average pooling, RMSNorm, LayerNorm, row softmax, fused
self-attention, decode attention over a KV cache and Mamba's selective scan. Each ``nki_*``
kernel runs unchanged on a Trainium instance with NKI's own imports; read one with
``inspect.getsource``. :func:`matmul` and its siblings run a kernel on numpy arrays (or
shapes, timing only) and return a :class:`trnlab.core.Run`; ``tiled(ctx, a_t, b, c)`` etc. are
the same kernels as ``trnlab.core`` kernels.

>>> import numpy as np
>>> from trnlab import kernels
>>> a, b = np.ones((200, 300)), np.ones((300, 100))
>>> run = kernels.matmul(a, b, variant="tiled", dtype="bf16")
>>> float(run.output[0, 0]), run.output.shape
(300.0, (200, 100))
"""

from ._api import (
    attention,
    avgpool2d,
    blocked_mn,
    blocked_mnk,
    hoisted,
    layernorm,
    matmul,
    matmul_bias_act,
    matmul_bias_act_kernel,
    pipelined,
    rmsnorm,
    selective_scan,
    selective_scan_kernel,
    softmax,
    tensor_add,
    tiled,
    transpose,
    transpose2d,
    transpose_kernel,
)
from ._attention import attention_reference, nki_attention
from ._decode import BLOCK as BLOCK_DECODE
from ._decode import nki_decode_attention
from ._elementwise import nki_avgpool2d, nki_tensor_add
from ._epilogue import nki_matmul_bias_act
from ._mamba import nki_selective_scan, selective_scan_reference
from ._matmul import (
    VARIANTS,
    nki_matmul_blocked_mn,
    nki_matmul_blocked_mnk,
    nki_matmul_hoisted,
    nki_matmul_tiled,
)
from ._norms import nki_layernorm, nki_rmsnorm, nki_softmax
from ._transpose import nki_transpose, nki_transpose2d

__all__ = [
    "BLOCK_DECODE",
    "VARIANTS",
    "attention",
    "attention_reference",
    "avgpool2d",
    "blocked_mn",
    "blocked_mnk",
    "hoisted",
    "layernorm",
    "matmul",
    "matmul_bias_act",
    "matmul_bias_act_kernel",
    "nki_attention",
    "nki_avgpool2d",
    "nki_decode_attention",
    "nki_layernorm",
    "nki_matmul_bias_act",
    "nki_matmul_blocked_mn",
    "nki_matmul_blocked_mnk",
    "nki_matmul_hoisted",
    "nki_matmul_tiled",
    "nki_rmsnorm",
    "nki_selective_scan",
    "nki_softmax",
    "nki_tensor_add",
    "nki_transpose",
    "nki_transpose2d",
    "pipelined",
    "rmsnorm",
    "selective_scan",
    "selective_scan_kernel",
    "selective_scan_reference",
    "softmax",
    "tensor_add",
    "tiled",
    "transpose",
    "transpose2d",
    "transpose_kernel",
]
