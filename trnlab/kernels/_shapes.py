"""Shape checks of the numpy references (``attention_reference``, ``selective_scan_reference``):
each argument's axes are named by letters, and a letter must mean the same size everywhere."""

from __future__ import annotations

import numpy as np

from trnlab._checks import flag
from trnlab.core import KernelArgumentError
from trnlab.core._context import _values

__all__ = ["need_flag", "need_shapes"]


def need_shapes(arrays: dict, axes: dict[str, str]) -> list[np.ndarray]:
    """The arrays as float64, checked against ``axes`` (``{"q": "S d", "k": "T d"}``): real
    values, at least one element, as many axes as letters, and each letter one size; else a
    teaching error naming the argument, its shape and the one it needs."""
    sizes: dict[str, tuple[int, str]] = {}
    out = []
    for name, x in arrays.items():
        letters = axes[name].split()
        a = _values(x, name)
        if a.ndim != len(letters) or not a.size:
            raise KernelArgumentError(
                f"{name} must be a non-empty array of shape [{', '.join(letters)}]; got "
                f"shape {a.shape}"
            )
        for letter, n in zip(letters, a.shape, strict=True):
            seen = sizes.setdefault(letter, (n, name))
            if seen[0] != n:
                raise KernelArgumentError(
                    f"{name} has {n} along {letter} but {seen[1]} has {seen[0]}: shapes "
                    + ", ".join(f"{k} [{', '.join(axes[k].split())}]" for k in arrays)
                )
        out.append(a.astype(np.float64))
    return out


def need_flag(value, what: str) -> bool:
    """A reference's boolean option, or a teaching error (``"no"`` is not False)."""
    return flag(value, what, KernelArgumentError)
