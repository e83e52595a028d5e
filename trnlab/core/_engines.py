"""Vector, Scalar and GpSimd engine instructions of the kernel API (a mixin of KernelContext).

Scalar: ``f(x * scale + bias)`` with a per-partition bias, reading SBUF or PSUM (the usual way
out of PSUM, fused with an epilogue). Vector: elementwise ops of one or two tensors and
reductions along the free dimension. GpSimd: general-purpose SIMD ops on SBUF data (it has no
PSUM port). Every result is written to SBUF, rounded to the output tile's format.

These methods are on the recording's hot path: the numerics closures are made only when
numerics are on, and error messages are composed only when there is an error.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from trnlab._checks import choose

from . import _program as P
from ._errors import HardwareRuleError, KernelArgumentError, OperandPlacementError
from ._tiles import Tile, View

__all__ = ["ACTIVATIONS", "EngineOps", "quantize"]

_FIELDS = P.N_FIELDS


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
_FUNC_IDS = {name: i for i, name in enumerate(ACTIVATIONS)}
_INF = float("inf")
_INFINITIES = frozenset((_INF, -_INF))  # immediates refused, checked on every instruction


def _act_fn(func, s_num, b_num):
    """The numerics of an activation: f(x * scale + bias), scale or bias maybe a tile."""
    f = ACTIVATIONS[func]
    if s_num is None:
        return lambda x, s: f(x * s + np.float32(b_num))
    if b_num is None:
        return lambda x, b: f(x * np.float32(s_num) + b)
    return lambda x: f(x * np.float32(s_num) + np.float32(b_num))


def _scalar_fn(op, value):
    g = _BINARY[op]
    v = np.float32(value)
    return lambda x: g(x, v)


def _is_tile(x) -> bool:
    return type(x) is View or type(x) is Tile


_COPY_ENGINES = {"vector": P.VECTOR, "scalar": P.SCALAR, "gpsimd": P.GPSIMD}


def _choice(value, table, what: str):
    """``table[value]`` (the name in any case), or a teaching error listing the choices."""
    try:
        return table[value]
    except (KeyError, TypeError):
        return table[_name(value, table, what)]


def _name(value, table, what: str) -> str:
    """The key of ``table`` that ``value`` names, in any case ("Relu"), or a teaching error
    with the nearest name."""
    return choose(value, table, what, KernelArgumentError)


def _number(value, what: str) -> float:
    """A finite real number (an instruction immediate), or a teaching error."""
    if type(value) is float or type(value) is int:
        if math.isfinite(value):
            return value
    elif isinstance(value, int | float | np.floating | np.integer) and not isinstance(value, bool):
        if math.isfinite(float(value)):
            return float(value)
    raise KernelArgumentError(f"{what} must be a finite number; got {value!r}")


class EngineOps:
    """Elementwise engine instructions; relies on KernelContext's ``_view``, ``_check_read``,
    ``_wrote`` and ``_rows``."""

    def _elementwise(
        self,
        op,
        engine,
        out,
        ins,
        fn,
        what: str,
        aux: int = -1,
        fn_args: tuple = (),
        elements: int | None = None,
        check: bool = True,
        psum_out: bool = False,
    ) -> int:
        """Check and record one Vector / Scalar / GpSimd instruction ``out = fn(*fn_args)(*ins)``;
        ``fn`` is called only when numerics are on (None: the caller computes the values).

        ``elements`` overrides the elements per partition the engine processes (default: the
        output's; the input's for a reduction), ``check=False`` skips the input-shape rule (for
        instructions whose inputs and output differ in shape), ``psum_out`` lets the Vector and
        Scalar engines write PSUM (as NKI's instructions may)."""
        o = out.full if type(out) is Tile else out
        if type(o) is not View or o.tile.freed:
            o = self._view(out, what)  # the teaching error
        ot = o.tile
        if ot.space == "psum" and (not psum_out or engine == P.GPSIMD):
            if engine == P.GPSIMD:
                raise OperandPlacementError(
                    f"{what} on GpSimd writes PSUM tile {ot.name!r}; GpSimd has no PSUM port. "
                    f"Use the Vector or Scalar engine, or write an SBUF tile."
                )
            raise OperandPlacementError(
                f"{what} writes PSUM tile {ot.name!r}; only the Tensor Engine writes PSUM. "
                f"Write an SBUF tile."
            )
        op0, op1, of0, of1 = o.region
        parts = op1 - op0
        free = of1 - of0
        fid = ot.fmt_id
        bits = -1.0
        flags = 0
        views = []
        reduce = op == P.REDUCE
        for x in ins:
            v = x.full if type(x) is Tile else x
            if type(v) is not View or v.tile.freed:
                v = self._view(x, what)
            t = v.tile
            vp0, vp1, vf0, vf1 = v.region
            vfree = vf1 - vf0
            if check and (vp1 - vp0 != parts or (vfree != free and vfree != 1 and not reduce)):
                raise HardwareRuleError(
                    f"{what}: input region {v.shape} does not match output {o.shape}"
                )
            if t.space == "psum":
                if engine == P.GPSIMD:
                    raise OperandPlacementError(
                        f"{what} on GpSimd reads PSUM; GpSimd has no PSUM port. Use the Vector "
                        f"or Scalar engine."
                    )
                flags = P.FLAG_PSUM_IN
            if not t.fully_written:
                self._check_read(v, what)
            if t.bits > bits:
                bits = t.bits
                fid = t.fmt_id
            if reduce:
                free = vfree
            views.append(v)
        if elements is not None:
            free = int(elements)
        n_in = len(views)
        if n_in == 1:  # the common case first
            a = views[0]
            row = (op, engine, ot.id, a.tile.id, -1, -1, parts, free, 0, 0, 1, fid, aux, 0,
                   flags, o.key, a.key, -1, -1, -1, -1, -1)  # fmt: skip
        elif n_in == 0:
            row = (op, engine, ot.id, -1, -1, -1, parts, free, 0, 0, 0, fid, aux, 0, flags,
                   o.key, -1, -1, -1, -1, -1, -1)  # fmt: skip
        else:
            a, b = views[0], views[1]
            c_id, c_key = (views[2].tile.id, views[2].key) if n_in > 2 else (-1, -1)
            row = (op, engine, ot.id, a.tile.id, b.tile.id, -1, parts, free, 0, 0, n_in, fid,
                   aux, 0, flags, o.key, a.key, b.key, -1, -1, c_id, c_key)  # fmt: skip
        i = len(self._rows) // _FIELDS
        self._rows.extend(row)
        if not i & self._tick:
            self.progress.tick(i)
        if self.numerics and fn is not None:
            o.set(quantize(np.asarray(fn(*fn_args)(*[v.get() for v in views]), np.float32), ot.fmt))
        ot.version += 1  # KernelContext._wrote, inline: the hot path
        if not ot.fully_written:
            ot.mark_written(o.region)
        return i

    def activation(self, out, src, func: str = "identity", scale=1.0, bias=None) -> int:
        """Scalar engine: ``out = func(src * scale + bias)``; ``scale`` and ``bias`` are numbers
        or per-partition ``[P, 1]`` SBUF views (the Scalar engine's pipelined multiply-add, at
        no extra cost). Reads SBUF or PSUM, writes SBUF (with a cast). A function other than
        the one the engine used last first loads its table (``act_table_load``)."""
        fid = _FUNC_IDS.get(func) if type(func) is str else None
        if fid is None:
            func = _name(func, ACTIVATIONS, "activation")
            fid = _FUNC_IDS[func]
        if (type(scale) is float or type(scale) is int) and bias is None:
            if scale != scale or scale in _INFINITIES:
                _number(scale, "activation scale")
            return self._elementwise(
                P.ACTIVATION, P.SCALAR, out, (src,), _act_fn, "activation", fid, (func, scale, 0.0)
            )
        tiles = []
        s_num = b_num = None
        if _is_tile(scale):
            tiles.append(scale)
        else:
            s_num = _number(scale, "activation scale")
        if bias is not None and _is_tile(bias):
            tiles.append(bias)
        else:
            b_num = 0.0 if bias is None else _number(bias, "activation bias")
        if len(tiles) == 2:
            raise KernelArgumentError(
                "activation takes a per-partition scale tile or a bias tile, not both at once "
                "(the engine reads one extra operand); fold one into a number or a separate op"
            )
        return self._elementwise(
            P.ACTIVATION,
            P.SCALAR,
            out,
            (src, *tiles),
            _act_fn,
            "activation",
            fid,
            (func, s_num, b_num),
        )

    def tensor_tensor_scan(
        self, out, a, b, initial=0.0, op0: str = "multiply", op1: str = "add"
    ) -> int:
        """Vector engine scan along the free dimension:
        ``out[:, j] = op1(op0(a[:, j], out[:, j - 1]), b[:, j])`` with ``out[:, -1]`` =
        ``initial`` (a number or a ``[P, 1]`` view): a linear recurrence such as Mamba's
        selective scan in one instruction (ISA cost ~2N cycles)."""
        g0 = _choice(op0, _BINARY, "tensor_tensor_scan op0")
        g1 = _choice(op1, _BINARY, "tensor_tensor_scan op1")
        ins = [a, b]
        init_num = None
        if _is_tile(initial):
            ins.append(initial)
        else:
            init_num = _number(initial, "tensor_tensor_scan initial")

        def fn():
            def scan(x, y, init=None):
                prev = (
                    np.full(x.shape[0], init_num, np.float32)
                    if init is None
                    else np.asarray(init, np.float32)[:, 0]
                )
                res = np.empty_like(x, dtype=np.float32)
                for j in range(x.shape[1]):
                    prev = g1(g0(x[:, j], prev), y[:, j]).astype(np.float32)
                    res[:, j] = prev
                return res

            return scan

        return self._elementwise(P.TENSOR_SCAN, P.VECTOR, out, ins, fn, "tensor_tensor_scan")

    def tensor_tensor(self, out, a, b, op: str = "add") -> int:
        """Vector engine: ``out = a <op> b`` elementwise (add, subtract, multiply, maximum, ...)."""
        g = _choice(op, _BINARY, "tensor_tensor op")
        return self._elementwise(P.TENSOR_TENSOR, P.VECTOR, out, (a, b), lambda: g, "tensor_tensor")

    def tensor_scalar(self, out, src, op: str = "multiply", value: float = 1.0) -> int:
        """Vector engine: ``out = src <op> value``."""
        if type(op) is not str or op not in _BINARY:
            op = _name(op, _BINARY, "tensor_scalar op")
        if (
            not (type(value) is float or type(value) is int)
            or value != value
            or value in _INFINITIES
        ):
            value = _number(value, "tensor_scalar value")
        return self._elementwise(
            P.TENSOR_SCALAR, P.VECTOR, out, (src,), _scalar_fn, "tensor_scalar", -1, (op, value)
        )

    def reduce(self, out, src, op: str = "add") -> int:
        """Vector engine: reduce ``src[P, F]`` along the free dimension into ``out[P, 1]``."""
        g = _choice(op, _REDUCE, "reduction")
        o = self._view(out, "reduce")
        if o.free != 1:
            raise HardwareRuleError(f"reduce output must be [P, 1], got {o.shape}")
        return self._elementwise(
            P.REDUCE,
            P.VECTOR,
            out,
            (src,),
            lambda: lambda x: g(x, axis=1, keepdims=True),
            "reduce",
        )

    def copy(self, out, src, engine: str = "vector") -> int:
        """Copy ``src`` to SBUF ``out`` with a cast to its format: the way out of PSUM.
        ``engine`` is ``"vector"``, ``"scalar"`` or ``"gpsimd"`` (GpSimd cannot read PSUM)."""
        e = _choice(engine, _COPY_ENGINES, "copy engine")
        return self._elementwise(P.COPY, e, out, (src,), lambda: lambda x: x, "copy")

    def memset(self, out, value: float = 0.0, engine: str = "vector") -> int:
        """Fill an SBUF region with ``value`` (Vector or GpSimd engine)."""
        if engine != "vector" and engine != "gpsimd":
            engine = _name(engine, ("vector", "gpsimd"), "memset engine")
        value = _number(value, "memset value")
        o = self._view(out, "memset")

        def fn():
            return lambda: np.full(o.shape, np.float32(value), np.float32)

        return self._elementwise(P.MEMSET, _COPY_ENGINES[engine], out, (), fn, "memset")

    def gpsimd(self, out, a, b=None, op: str = "add") -> int:
        """GpSimd engine (8 general-purpose SIMD cores): elementwise ``a <op> b`` (or ``op(a)``
        for ``op`` in the activation table) on SBUF data."""
        if b is not None:
            g = _choice(op, _BINARY, "gpsimd binary op")
            return self._elementwise(P.GPSIMD_OP, P.GPSIMD, out, (a, b), lambda: g, "gpsimd")
        g = _choice(op, ACTIVATIONS, "gpsimd unary op (an activation function)")
        return self._elementwise(P.GPSIMD_OP, P.GPSIMD, out, (a,), lambda: g, "gpsimd")
