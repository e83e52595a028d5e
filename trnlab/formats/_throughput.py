"""Tensor Engine throughput of a format on a chip, read from the catalogue (never copied here).

The catalogue rates data types, not encodings: every fp8 encoding a chip takes runs at its fp8
rate (where the catalogue lists a chip's FP8 encodings, ``fp8_encodings``, others are refused:
OCP's E4M3FN, for one, reached the Tensor Engine only with NeuronCore-v4), both MXFP8 element
types at its mxfp8 rate. Formats with no rated type (fp6/MXFP6, MXINT8, the
fp4 element alone) have no published Trainium rate, and trnlab does not invent one.
"""

from __future__ import annotations

from ._errors import FormatError
from ._specs import Format, spec

__all__ = ["catalog_dtype", "throughput"]

#: Format name -> the catalogue's data-type name (trnlab.catalog.DTYPES).
_CATALOG_DTYPE = {
    "fp32": "fp32",
    "tf32": "tf32",
    "bf16": "bf16",
    "fp16": "fp16",
    "fp8_e4m3fn": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "fp8_e3m4": "fp8",
    "fp8_e4m3fnuz": "fp8",
    "fp8_e5m2fnuz": "fp8",
    "mxfp8_e4m3": "mxfp8",
    "mxfp8_e5m2": "mxfp8",
    "mxfp4": "mxfp4",
    "int8": "int8",
}


def catalog_dtype(fmt: str | Format) -> str:
    """The catalogue data type a format runs as on the Tensor Engine (``"fp8_e5m2"`` -> ``"fp8"``).

    Raises
    ------
    ValueError
        For a format with no rated data type; the message lists the formats that have one.
    """
    f = spec(fmt)
    if f.name not in _CATALOG_DTYPE:
        raise FormatError(
            f"no Tensor Engine rate is published for {f.name} on any chip in the catalogue. "
            f"Formats with a rate: {', '.join(_CATALOG_DTYPE)}."
        )
    return _CATALOG_DTYPE[f.name]


def throughput(
    fmt: str | Format, chip: str, sparse: bool = False, pattern: str | None = None
) -> float:
    """Peak Tensor Engine throughput of ``chip`` for inputs in ``fmt``, in FLOP/s (OP/s for int8).

    Reads ``trnlab.catalog.chip(chip).peak_flops(dtype, sparse=sparse)``, so the figure and its
    sources live in the catalogue. ``sparse=True`` gives the peak with N:M structured sparsity
    at its best pattern.

    Raises
    ------
    ValueError
        For a format without a rated data type, or an FP8 encoding the chip's matmul does not
        take; ``trnlab.catalog.CatalogError`` (a ValueError) when the chip lacks the type or
        sparsity, naming what it has.

    Examples
    --------
    >>> throughput("mxfp4", "trn3") >= throughput("bf16", "trn3")
    True
    """
    dtype = catalog_dtype(fmt)
    from trnlab import catalog  # imported on use: the catalogue parses its data files

    c = catalog.chip(chip)
    why = c.fp8_refusal(spec(fmt).name) if dtype == "fp8" else None
    if why:  # an FP8 encoding the chip's matmul does not take
        raise FormatError(why)
    return c.peak_flops(dtype, sparse=sparse, pattern=pattern)
