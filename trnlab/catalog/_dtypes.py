"""Names of the tensor-engine data types the catalogue rates, with the spellings people use."""

from __future__ import annotations

import difflib

from ._figures import CatalogError

__all__ = ["DTYPES", "dtype_name"]

#: Data types with a published tensor-engine rate somewhere in the catalogue.
DTYPES: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "mxfp8", "mxfp4", "int8")

_ALIASES = {
    "float32": "fp32",
    "f32": "fp32",
    "tensorfloat32": "tf32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "f16": "fp16",
    "float8": "fp8",
    "cfp8": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e4m3fn": "fp8",
    "fp8_e5m2": "fp8",
    "fp8_e3m4": "fp8",
    "mxfp8_e4m3": "mxfp8",
    "mxfp8_e5m2": "mxfp8",
    "fp4": "mxfp4",
    "mxfp4_e2m1": "mxfp4",
    "i8": "int8",
}


def dtype_name(dtype: str) -> str:
    """Return the catalogue's name for ``dtype`` (``"bfloat16"`` -> ``"bf16"``).

    Raises
    ------
    CatalogError
        For a name that is not a rated data type; the message lists the ones that are.
    """
    if not isinstance(dtype, str):
        raise CatalogError(f"a data type is named by a string such as 'bf16', not {dtype!r}")
    key = dtype.strip().lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key in DTYPES:
        return key
    near = difflib.get_close_matches(key, DTYPES + tuple(_ALIASES), n=1)
    hint = f" Did you mean {near[0]!r}?" if near else ""
    raise CatalogError(
        f"unknown data type {dtype!r}. The catalogue rates {', '.join(DTYPES)}.{hint}"
    )
