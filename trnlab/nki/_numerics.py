"""The values NKI's instructions compute: ALU operators, activation functions, reductions.

Engines compute in float32 and round the result to the output tile's dtype (NKI's ISA
documents); trnlab computes the float32 math with numpy and rounds through
:func:`trnlab.nki._dtypes.round_to`. Operators are named as NKI names them; a kernel passes the
``nki.language`` function (``op=nl.add``), and numpy's ufuncs are accepted too (``np.exp``).

Formulas: gelu is ``x * Phi(x)`` (erf form); ``gelu_apprx_tanh`` the tanh approximation of
Hendrycks & Gimpel (2016); softplus ``log(1 + e^x)``; mish ``x * tanh(softplus(x))``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from trnlab.core import ACTIVATIONS, KernelArgumentError

__all__ = ["ACT", "ALU", "REDUCE", "act_id", "name_of", "register"]

_erf = np.frompyfunc(math.erf, 1, 1)


def erf(x):
    return np.asarray(_erf(np.asarray(x, np.float64)), np.float64).astype(np.float32)


def _ints(f):
    def g(a, b):
        r = f(np.nan_to_num(a).astype(np.int64), np.nan_to_num(b).astype(np.int64))
        return r.astype(np.float32)

    return g


#: Binary ALU operators (Vector / GpSimd / Scalar arithmetic), by NKI name.
ALU: dict[str, Callable] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "power": np.power,
    "abs_max": lambda a, b: np.maximum(np.abs(a), np.abs(b)),
    "abs_min": lambda a, b: np.minimum(np.abs(a), np.abs(b)),
    "mod": np.mod,
    "fmod": np.fmod,
    "equal": lambda a, b: (a == b).astype(np.float32),
    "not_equal": lambda a, b: (a != b).astype(np.float32),
    "less": lambda a, b: (a < b).astype(np.float32),
    "less_equal": lambda a, b: (a <= b).astype(np.float32),
    "greater": lambda a, b: (a > b).astype(np.float32),
    "greater_equal": lambda a, b: (a >= b).astype(np.float32),
    "logical_and": lambda a, b: ((a != 0) & (b != 0)).astype(np.float32),
    "logical_or": lambda a, b: ((a != 0) | (b != 0)).astype(np.float32),
    "logical_xor": lambda a, b: ((a != 0) ^ (b != 0)).astype(np.float32),
    "bitwise_and": _ints(np.bitwise_and),
    "bitwise_or": _ints(np.bitwise_or),
    "bitwise_xor": _ints(np.bitwise_xor),
    "left_shift": _ints(np.left_shift),
    "right_shift": _ints(np.right_shift),
    "bypass": lambda a, b: a,
}

#: Reductions along the free axes (Vector) or across partitions (GpSimd), by NKI name.
REDUCE: dict[str, Callable] = {
    "add": np.sum,
    "maximum": np.max,
    "minimum": np.min,
    "multiply": np.prod,
    "average": np.mean,
    "bitwise_and": lambda x, axis, keepdims=False: np.bitwise_and.reduce(
        np.nan_to_num(x).astype(np.int64), axis=axis, keepdims=keepdims
    ),
    "bitwise_or": lambda x, axis, keepdims=False: np.bitwise_or.reduce(
        np.nan_to_num(x).astype(np.int64), axis=axis, keepdims=keepdims
    ),
}


def _softplus(x):
    return np.logaddexp(0, x)


#: Scalar-engine activation functions, by NKI name: f(x) in float32.
ACT: dict[str, Callable] = {
    "copy": lambda x: x,
    "identity": lambda x: x,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "reciprocal": lambda x: 1 / x,
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2))),
    "gelu_apprx_tanh": ACTIVATIONS["gelu"],
    "gelu_apprx_sigmoid": lambda x: x / (1 + np.exp(-1.702 * x)),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "softplus": _softplus,
    "mish": lambda x: x * np.tanh(_softplus(x)),
    "erf": erf,
    "square": np.square,
    "abs": np.abs,
    "sign": np.sign,
    "negative": np.negative,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "arctan": np.arctan,
    "ceil": np.ceil,
    "floor": np.floor,
    "trunc": np.trunc,
}
# Table ids the Scalar engine switches between (trnlab.core charges a table load when the
# function changes; copy and identity need none): the core's own functions keep their index.
_CORE = list(ACTIVATIONS)
_IDS = {"copy": 0, "identity": 0}
for _n in ACT:
    if _n not in _IDS:
        _IDS[_n] = _CORE.index(_n) if _n in _CORE else len(_CORE) + len(_IDS)

_NAMES: dict[int, str] = {}  # id(function object) -> NKI name
_NUMPY = {
    np.add: "add",
    np.subtract: "subtract",
    np.multiply: "multiply",
    np.divide: "divide",
    np.true_divide: "divide",
    np.maximum: "maximum",
    np.minimum: "minimum",
    np.power: "power",
    np.exp: "exp",
    np.log: "log",
    np.sqrt: "sqrt",
    np.tanh: "tanh",
    np.square: "square",
    np.abs: "abs",
    np.absolute: "abs",
    np.sign: "sign",
    np.negative: "negative",
    np.sin: "sin",
    np.cos: "cos",
    np.arctan: "arctan",
    np.reciprocal: "reciprocal",
    np.equal: "equal",
    np.not_equal: "not_equal",
    np.greater: "greater",
    np.greater_equal: "greater_equal",
    np.less: "less",
    np.less_equal: "less_equal",
    np.max: "max",
    np.min: "min",
    np.sum: "sum",
    np.prod: "prod",
}
# A reduction named by its nl / numpy reduction function (op=nl.max in older editions'
# tensor_reduce) is the ALU operation that folds the elements.
_REDUCTIONS = {"max": "maximum", "min": "minimum", "sum": "add", "prod": "multiply"}


def register(fn, name: str) -> None:
    """Make ``fn`` (an ``nki.language`` function) name the operator ``name``."""
    _NAMES[id(fn)] = name


def name_of(op, table: dict, what: str) -> str:
    """The NKI name of operator ``op`` (an nl function, a numpy ufunc or a name) in ``table``."""
    name = _NAMES.get(id(op))
    if name is None:
        name = _NUMPY.get(op) if not isinstance(op, str) else op
    if name in table:
        return name
    if _REDUCTIONS.get(name) in table:
        return _REDUCTIONS[name]
    raise KernelArgumentError(
        f"{what}: {getattr(op, '__name__', op)!r} is not one of its operators; it takes "
        f"nl.{', nl.'.join(table)}"
    )


def act_id(name: str) -> int:
    """The activation-table id of function ``name`` (0: no table)."""
    return _IDS[name]
