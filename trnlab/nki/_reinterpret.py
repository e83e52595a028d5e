"""Reading an HBM tensor's bits as another dtype (``t.ap(dtype=...)``, ``t.view(dtype)``).

The MX deep dive hands its kernel packed MX data as integers (four fp8 codes in each uint32,
two fp4 codes in each uint8) and reads them as ``float8_e5m2_x4`` / ``float4_e2m1fn_x4`` by an
access pattern with a dtype. trnlab keeps values, not bit patterns, so a reinterpretation is
made from the argument's own numpy array: its bytes are decoded as the new dtype (little
endian, as the host lays them out; within a byte, the first fp4 code in the low nibble) into a
new read-only HBM tensor the kernel then accesses. What is modelled: the kernel's numpy inputs
it has not written, read whole as a dtype whose element size divides the rows' bytes; in a
timing-only run (placeholder inputs) only the shapes change.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from trnlab.core import KernelArgumentError

from ._dtypes import DType, round_to
from ._errors import NotModelledError

# The numpy dtype whose bits are each NKI dtype's (x4 types: one packed value's).
_BITS_AS = {
    "float32": np.float32,
    "tfloat32": np.float32,
    "bfloat16": ml_dtypes.bfloat16,
    "float16": np.float16,
    "float8_e4m3": ml_dtypes.float8_e4m3,
    "float8_e5m2": ml_dtypes.float8_e5m2,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "fp8_e5m2": ml_dtypes.float8_e5m2,
    "fp8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "int8": np.int8,
    "uint8": np.uint8,
    "bool_": np.uint8,
    "float8_e8m0fnu": np.uint8,
    "int16": np.int16,
    "uint16": np.uint16,
    "int32": np.int32,
    "uint32": np.uint32,
}


def reinterpret(t, dtype: DType, what: str):
    """A new HBM tensor holding ``t``'s storage read as ``dtype`` (its last dimension
    rescaled by the ratio of element sizes)."""
    from ._tensor import NkiTensor
    from ._trace import current

    s = t._s
    if s.dtype is dtype:
        return t
    if "mx" in (s.dtype.kind, dtype.kind):
        raise NotModelledError(
            f"{what}: {s.dtype.name} -> {dtype.name}: trnlab's unpacked MX tiles have no bit "
            f"layout to read; the NKI MX types are the x4-packed ones (float8_e4m3fn_x4 ...)"
        )
    if s.on_chip:
        raise NotModelledError(
            f"{what}: reading on-chip {t} as {dtype.name} (a reinterpret of SBUF/PSUM bits) is "
            f"not modelled yet in trnlab.nki; an HBM input can be read as another dtype"
        )
    if not s.input or s.stored:
        raise NotModelledError(
            f"{what}: reading {s.name!r} as {dtype.name} is modelled for the kernel's inputs it "
            f"has not written; {s.name!r} is "
            f"{'written by the kernel' if s.input else 'made by the kernel'}"
        )
    row_bits = s.shape[-1] * s.dtype.bits
    if row_bits % dtype.bits:
        raise KernelArgumentError(
            f"{what}: a row of {s.name!r} holds {s.shape[-1]} x {s.dtype.bits} bits, not a whole "
            f"number of {dtype.name} elements ({dtype.bits} bits each)"
        )
    shape = (*s.shape[:-1], row_bits // dtype.bits)
    tr = current()
    key = ("reinterpret", s.id, dtype.name)
    got = tr.constants.get(key)  # read once per trace, however many tiles take it
    if got is not None:
        return NkiTensor(got)
    data = None
    if tr.numerics:
        raw = s.raw
        if raw is None:
            raise NotModelledError(
                f"{what}: reading {s.name!r} as {dtype.name} needs its bits: pass the numpy "
                f"array itself (not nki.hbm(values, dtype)), or run timing only"
            )
        data = _decode(raw, dtype).reshape(shape + ((4,) if dtype.packed > 1 else ()))
    ns = tr._storage(shape, dtype, s.buffer, f"{s.name}_as_{dtype.name}", data)
    ns.input = True
    ns.raw = None
    # the decoded copy and its source are read-only from here: a write to either would not
    # reach the other, as it would on hardware
    ns.frozen = f"{ns.name!r} is {s.name!r} read as {dtype.name} (a copy of its bits)"
    s.frozen = f"{s.name!r} was read as {dtype.name} (trnlab keeps a copy of its bits)"
    tr.constants[key] = ns
    tr.hbm.append(ns)
    return NkiTensor(ns)


def _decode(raw: np.ndarray, d: DType) -> np.ndarray:
    """The bytes of ``raw`` as values of ``d`` (float32; x4 types: every packed value)."""
    b = np.ascontiguousarray(raw).reshape(-1).view(np.uint8)
    if d.packed > 1 and d.element == "fp4_e2m1":
        codes = np.stack([b & 0xF, b >> 4], axis=-1).reshape(-1)  # low nibble first
        return codes.view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    as_type = _BITS_AS[d.element if d.packed > 1 else d.name]
    values = b.view(as_type).astype(np.float32)
    return round_to(values, d) if d.name == "tfloat32" else values  # tf32: fp32 bits, rounded
