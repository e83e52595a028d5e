"""Vector, Scalar and GpSimd engine instructions of the kernel API (a mixin of KernelContext).

Scalar: ``f(x * scale + bias)`` with a per-partition bias, reading SBUF or PSUM (the usual way
out of PSUM, fused with an epilogue). Vector: elementwise ops of one or two tensors and
reductions along the free dimension. GpSimd: general-purpose SIMD ops on SBUF data (it has no
PSUM port). Every result is written to SBUF, rounded to the output tile's format.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import _program as P
from ._errors import HardwareRuleError, OperandPlacementError

__all__ = ["ACTIVATIONS", "EngineOps", "quantize"]


def quantize(x: np.ndarray, fmt: str, axis: int = -1) -> np.ndarray:
    """Values of ``x`` rounded to ``fmt`` (float32), through trnlab.formats."""
    if fmt == "fp32":
        return np.asarray(x, np.float32)
    from trnlab import formats  # lazy: keeps `import trnlab.core` light

    return formats.quantize(x, fmt, axis=axis)


def _gelu(x):
    # tanh approximation (Hendrycks & Gimpel 2016), the form activation tables commonly use.
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))


#: Scalar-engine activation functions f in f(x * scale + bias).
ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "identity": lambda x: x,
    "relu": lambda x: np.maximum(x, 0),
    "gelu": _gelu,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "tanh": np.tanh,
    "exp": np.exp,
    "square": np.square,
}

_BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "divide": np.divide,
}
_REDUCE = {"add": np.sum, "maximum": np.max, "minimum": np.min}
_COPY_ENGINES = {"vector": P.VECTOR, "scalar": P.SCALAR, "gpsimd": P.GPSIMD}


class EngineOps:
    """Elementwise engine instructions; relies on KernelContext's ``_view`` and ``_record``."""

    # ------------------------------------------------------------------------------------------
    # Vector, Scalar and GpSimd engines
    # ------------------------------------------------------------------------------------------
    def _elementwise(self, op, engine, out, ins, fn, what) -> int:
        o = self._view(out, f"{what} output")
        views = [self._view(x, f"{what} input") for x in ins]
        if o.tile.space == "psum":
            raise OperandPlacementError(
                f"{what} writes PSUM tile {o.tile.name!r}; only the Tensor Engine writes PSUM. "
                f"Write an SBUF tile."
            )
        if engine == P.GPSIMD and any(v.tile.space == "psum" for v in views):
            raise OperandPlacementError(
                f"{what} on GpSimd reads PSUM; GpSimd has no PSUM port. Use the Vector or Scalar engine."
            )
        for v in views:
            if v.partitions != o.partitions or (op != P.REDUCE and v.free not in (o.free, 1)):
                raise HardwareRuleError(
                    f"{what}: input region {v.shape} does not match output {o.shape}"
                )
        row = dict(
            op=op,
            out=o.tile.id,
            partitions=o.partitions,
            free=max(v.free for v in views) if views else o.free,
            n_inputs=len(views),
            bits=max((v.tile.bits for v in views), default=o.tile.bits),
            out_region=o.region,
        )
        if views:
            row.update(in0=views[0].tile.id, in0_region=views[0].region)
        if len(views) > 1:
            row.update(in1=views[1].tile.id, in1_region=views[1].region)
        i = self._record(row, engine, reads=views, writes=(o,))
        if self.numerics:
            o.set(quantize(np.asarray(fn(*[v.get() for v in views]), np.float32), o.tile.fmt))
        return i

    def activation(self, out, src, func: str = "identity", scale: float = 1.0, bias=None) -> int:
        """Scalar engine: ``out = func(src * scale + bias)``; ``bias`` is a number or a
        per-partition ``[P, 1]`` SBUF view. Reads SBUF or PSUM, writes SBUF (with a cast)."""
        if func not in ACTIVATIONS:
            raise ValueError(f"unknown activation {func!r}; known: {', '.join(ACTIVATIONS)}")
        f = ACTIVATIONS[func]
        ins = [src]
        if bias is not None and not isinstance(bias, int | float):
            ins.append(bias)

            def fn(x, b):
                return f(x * np.float32(scale) + b)

        else:
            b0 = np.float32(bias or 0.0)

            def fn(x):
                return f(x * np.float32(scale) + b0)

        return self._elementwise(P.ACTIVATION, P.SCALAR, out, ins, fn, f"activation {func}")

    def tensor_tensor(self, out, a, b, op: str = "add") -> int:
        """Vector engine: ``out = a <op> b`` elementwise (add, subtract, multiply, maximum, ...)."""
        if op not in _BINARY:
            raise ValueError(f"unknown op {op!r}; known: {', '.join(_BINARY)}")
        return self._elementwise(
            P.TENSOR_TENSOR, P.VECTOR, out, [a, b], _BINARY[op], f"tensor_tensor {op}"
        )

    def tensor_scalar(self, out, src, op: str = "multiply", value: float = 1.0) -> int:
        """Vector engine: ``out = src <op> value``."""
        if op not in _BINARY:
            raise ValueError(f"unknown op {op!r}; known: {', '.join(_BINARY)}")
        v = np.float32(value)
        return self._elementwise(
            P.TENSOR_SCALAR,
            P.VECTOR,
            out,
            [src],
            lambda x: _BINARY[op](x, v),
            f"tensor_scalar {op}",
        )

    def reduce(self, out, src, op: str = "add") -> int:
        """Vector engine: reduce ``src[P, F]`` along the free dimension into ``out[P, 1]``."""
        if op not in _REDUCE:
            raise ValueError(f"unknown reduction {op!r}; known: {', '.join(_REDUCE)}")
        o = self._view(out, "reduce output")
        if o.free != 1:
            raise HardwareRuleError(f"reduce output must be [P, 1], got {o.shape}")
        return self._elementwise(
            P.REDUCE,
            P.VECTOR,
            out,
            [src],
            lambda x: _REDUCE[op](x, axis=1, keepdims=True),
            f"reduce {op}",
        )

    def copy(self, out, src, engine: str = "vector") -> int:
        """Copy ``src`` to SBUF ``out`` with a cast to its format: the way out of PSUM.
        ``engine`` is ``"vector"``, ``"scalar"`` or ``"gpsimd"`` (GpSimd cannot read PSUM)."""
        if engine not in _COPY_ENGINES:
            raise ValueError(
                f"copy engine must be one of {', '.join(_COPY_ENGINES)}, not {engine!r}"
            )
        return self._elementwise(
            P.COPY, _COPY_ENGINES[engine], out, [src], lambda x: x, f"copy ({engine})"
        )

    def memset(self, out, value: float = 0.0, engine: str = "vector") -> int:
        """Fill an SBUF region with ``value`` (Vector or GpSimd engine)."""
        if engine not in ("vector", "gpsimd"):
            raise ValueError(f"memset runs on 'vector' or 'gpsimd', not {engine!r}")
        o = self._view(out, "memset output")
        v = np.float32(value)
        return self._elementwise(
            P.MEMSET,
            _COPY_ENGINES[engine],
            out,
            [],
            lambda: np.full(o.shape, v, np.float32),
            "memset",
        )

    def gpsimd(self, out, a, b=None, op: str = "add") -> int:
        """GpSimd engine (8 general-purpose SIMD cores): elementwise ``a <op> b`` (or ``op(a)``
        for ``op`` in the activation table) on SBUF data."""
        if b is not None:
            if op not in _BINARY:
                raise ValueError(f"unknown op {op!r}; known: {', '.join(_BINARY)}")
            return self._elementwise(
                P.GPSIMD_OP, P.GPSIMD, out, [a, b], _BINARY[op], f"gpsimd {op}"
            )
        if op not in ACTIVATIONS:
            raise ValueError(f"unknown unary op {op!r}; known: {', '.join(ACTIVATIONS)}")
        return self._elementwise(P.GPSIMD_OP, P.GPSIMD, out, [a], ACTIVATIONS[op], f"gpsimd {op}")
