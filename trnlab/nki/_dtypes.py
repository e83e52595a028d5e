"""NKI's data types: their names, the trnlab format each is stored and rounded as, and the
conversions between them and numpy arrays.

An NKI dtype is a string (``nl.bfloat16 == "bfloat16"``), as in NKI. Floating-point values are
rounded through :mod:`trnlab.formats` (round to nearest even, bit-exact); integer types round
to the nearest integer (ties to even) and saturate to their range, an assumption: the NKI
documents say engines compute in fp32 and cast to the output type, not how. The x4-packed MX
types of NeuronCore-v4 hold four values per element: their numerics arrays carry a trailing
axis of 4 (element ``[..., j]`` is the j-th packed value).

Uninitialised memory holds NKI's sentinels (``nki.simulate``): NaN for floats, 4 for integers.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import numpy as np

from trnlab.core import KernelArgumentError

__all__ = ["DTYPES", "DType", "dtype_info", "from_numpy", "round_to", "to_numpy", "values_of"]


@dataclass(frozen=True)
class DType:
    """One NKI data type.

    Attributes
    ----------
    name : str
        NKI's name (``"bfloat16"``).
    fmt : str
        The trnlab storage format of the engine model (``"bf16"``; ``trnlab.core`` sizes tiles
        and picks Tensor Engine rates by it).
    kind : str
        ``"float"``, ``"int"``, ``"mx_x4"`` (NKI's packed MX) or ``"mx"`` (trnlab's unpacked
        MX tiles).
    bits : int
        Storage bits of one element.
    lo, hi : float
        Integer range (ints only).
    numpy : str or None
        The numpy dtype outputs of this type come back as (float32 where numpy has none).
    since : int
        First NeuronCore generation with the type (2, 3 or 4).
    element : str or None
        x4 types: the trnlab format of each packed value.
    """

    name: str
    fmt: str
    kind: str
    bits: int
    numpy: str | None = None
    lo: float = 0.0
    hi: float = 0.0
    since: int = 2
    element: str | None = None

    @property
    def is_float(self) -> bool:
        return self.kind in ("float", "mx")

    @property
    def packed(self) -> int:
        """Values per element (4 for the x4 types)."""
        return 4 if self.kind == "mx_x4" else 1

    @property
    def sentinel(self) -> float:
        """What uninitialised memory of this type holds (``nki.simulate``'s sentinels)."""
        return 4.0 if self.kind == "int" else float("nan")


def _int(name, bits, signed, fmt):
    lo = -(2 ** (bits - 1)) if signed else 0
    hi = 2 ** (bits - 1) - 1 if signed else 2**bits - 1
    return DType(name, fmt, "int", bits, name if name != "bool_" else "bool", lo, hi)


#: Every NKI dtype trnlab models, by NKI name.
DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("float32", "fp32", "float", 32, "float32"),
        DType("tfloat32", "tf32", "float", 32, "float32"),
        DType("bfloat16", "bf16", "float", 16, "float32"),
        DType("float16", "fp16", "float", 16, "float16"),
        DType("float8_e4m3", "fp8_e4m3", "float", 8, "float32"),
        DType("float8_e5m2", "fp8_e5m2", "float", 8, "float32"),
        DType("float8_e4m3fn", "fp8_e4m3fn", "float", 8, "float32"),
        DType("float8_e5m2_x4", "mxfp8_e5m2_x4", "mx_x4", 32, None, since=4, element="fp8_e5m2"),
        DType(
            "float8_e4m3fn_x4", "mxfp8_e4m3_x4", "mx_x4", 32, None, since=4, element="fp8_e4m3fn"
        ),
        DType("float4_e2m1fn_x4", "mxfp4_x4", "mx_x4", 16, None, since=4, element="fp4_e2m1"),
        _int("bool_", 8, False, "bool"),
        _int("int8", 8, True, "int8"),
        _int("uint8", 8, False, "uint8"),
        _int("int16", 16, True, "int16"),
        _int("uint16", 16, False, "uint16"),
        _int("int32", 32, True, "int32"),
        _int("uint32", 32, False, "uint32"),
    )
}
# trnlab's unpacked MX tiles (not NKI dtypes): values block-scaled per 32 along the partition
# (contraction) axis, multiplied at the Tensor Engine's MX rate on NeuronCore-v4. They let the
# matmul progression run "what if" MX timings without NKI's x4 packing (docs/nki.md).
for _n, _e in (("mxfp8_e4m3", "fp8_e4m3fn"), ("mxfp8_e5m2", "fp8_e5m2"), ("mxfp4", "fp4_e2m1")):
    DTYPES[_n] = DType(_n, _n, "mx", 8 if _n != "mxfp4" else 4, None, element=_e)
# The E8M0 scale type holds exponent codes 0..255: kept as integers (codes), numpy uint8.
DTYPES["float8_e8m0fnu"] = DType("float8_e8m0fnu", "uint8", "int", 8, "uint8", 0, 255, since=4)

# numpy (and ml_dtypes) dtype names -> NKI names.
_FROM_NUMPY = {
    "float32": "float32",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float8_e4m3": "float8_e4m3",
    "float8_e4m3fn": "float8_e4m3fn",
    "float8_e5m2": "float8_e5m2",
    "int8": "int8",
    "uint8": "uint8",
    "int16": "int16",
    "uint16": "uint16",
    "int32": "int32",
    "uint32": "uint32",
    "bool": "bool_",
}
_ALIASES = {"bool": "bool_", "fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def dtype_info(dtype) -> DType:
    """The :class:`DType` of an NKI dtype name, a numpy dtype or type (``np.float32``)."""
    if isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, str):
        key = dtype.strip().lower()  # "Float32", " bfloat16 ": names in any case
        d = DTYPES.get(key) or DTYPES.get(_ALIASES.get(key, ""))
        if d is not None:
            return d
        near = difflib.get_close_matches(key, list(DTYPES) + list(_ALIASES), n=1)
        if near:
            raise KernelArgumentError(
                f"unknown NKI dtype {dtype!r}. Did you mean nl.{_ALIASES.get(near[0], near[0])}? "
                f"The dtypes are nl.{', nl.'.join(DTYPES)}"
            )
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = None
        if name in _FROM_NUMPY:
            return DTYPES[_FROM_NUMPY[name]]
    raise KernelArgumentError(
        f"unknown NKI dtype {dtype!r}; the dtypes are nl.{', nl.'.join(DTYPES)} "
        f"(float64 and int64 do not exist on a NeuronCore)"
    )


def from_numpy(array: np.ndarray, what: str) -> DType:
    """The NKI dtype of a numpy array argument, or a teaching error for one NKI lacks."""
    name = array.dtype.name
    if name in _FROM_NUMPY:
        return DTYPES[_FROM_NUMPY[name]]
    hint = {
        "float64": "a.astype(np.float32)",
        "int64": "a.astype(np.int32)",
        "uint64": "a.astype(np.uint32)",
    }.get(name, "a cast to float32, bfloat16 (ml_dtypes) or an integer type")
    raise KernelArgumentError(
        f"{what} is a numpy array of {name}; a NeuronCore has no {name} (NKI's dtypes: "
        f"{', '.join(DTYPES)}). Pass {hint}."
    )


def round_to(x: np.ndarray, d: DType) -> np.ndarray:
    """``x`` (float32) rounded to ``d`` and returned as float32 (values representable in ``d``).

    Floats go through :func:`trnlab.formats.quantize`; integers round half to even and
    saturate (NaN becomes 0: an assumption, the cast's NaN rule is not documented). x4 types
    round each packed value to its element format.
    """
    if d.fmt == "fp32":
        return np.asarray(x, np.float32)
    if d.kind == "int":
        y = np.rint(np.asarray(x, np.float64))
        y = np.nan_to_num(y, nan=0.0, posinf=d.hi, neginf=d.lo)
        return np.clip(y, d.lo, d.hi).astype(np.float32)
    from trnlab import formats

    if d.kind == "mx":  # blocks of 32 along the partition / contraction axis
        return formats.quantize(np.asarray(x, np.float32), d.fmt, axis=0)
    fmt = d.element if d.kind == "mx_x4" else d.fmt
    return formats.quantize(np.asarray(x, np.float32), fmt)


def to_numpy(x: np.ndarray, d: DType) -> np.ndarray:
    """Stored values of type ``d`` as the numpy array a kernel output comes back as."""
    if d.numpy is None or d.numpy == "float32":
        return np.array(x, np.float32)
    if d.kind == "int":  # stored in fp32: 0xFFFFFFFF reads 2^32 there; saturate, never wrap
        return np.array(np.clip(np.asarray(x, np.float64), d.lo, d.hi), d.numpy)
    return np.array(x, d.numpy)


def values_of(array: np.ndarray, d: DType) -> np.ndarray:
    """A numpy argument as float32 values of type ``d`` (ml_dtypes arrays convert exactly)."""
    a = np.asarray(array)
    if a.dtype.kind == "b":
        a = a.astype(np.uint8)
    return np.array(a, np.float32) if d.kind == "int" else round_to(a.astype(np.float32), d)
