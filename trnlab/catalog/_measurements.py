"""Published hardware measurements that calibrate and validate the models.

The files under ``data/measurements/`` hold measured numbers, each with its source (a key of
``sources.toml``) and the kind of number it is (MEAS, FIG, RULE). They are data, not model
figures: the catalogue's figures are set from the calibration facts, and the validation cases are
what the models are compared against (``trnlab.kernels.fidelity``).
"""

from __future__ import annotations

import sys
from functools import cache
from importlib import resources
from typing import Any

from ._figures import CatalogError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["measurements"]

_KINDS = {"MEAS", "FIG", "RULE"}


@cache
def _read(name: str) -> dict[str, Any]:
    folder = resources.files("trnlab.catalog").joinpath("data", "measurements")
    files = sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))
    if name not in files:
        raise CatalogError(f"no measurements file {name!r}; there are: {', '.join(files)}")
    data = tomllib.loads(folder.joinpath(f"{name}.toml").read_text("utf-8"))
    from . import sources

    known = sources()
    for group in ("calibration", "validation"):
        for key, case in data.get(group, {}).items():
            if case.get("source") not in known:
                raise CatalogError(
                    f"{group}.{key}: source {case.get('source')!r} is not in sources.toml"
                )
            if case.get("kind") not in _KINDS:
                raise CatalogError(f"{group}.{key}: kind must be one of {sorted(_KINDS)}")
    return data


def measurements(name: str = "neuroncore") -> dict[str, dict[str, dict[str, Any]]]:
    """The measurements of ``name`` (a file of ``data/measurements``), as
    ``{"calibration": {id: case}, "validation": {id: case}}``; every case has ``what``,
    ``chip``, ``kind``, ``source`` and a published ``value`` (or a curve), and ``runner`` /
    ``params`` saying how to compute the model's value."""
    if not isinstance(name, str):
        raise CatalogError(
            f"measurements are named by a file name such as 'neuroncore', not {name!r}"
        )
    data = _read(name.strip().lower())
    return {
        g: {k: dict(v) for k, v in data.get(g, {}).items()} for g in ("calibration", "validation")
    }
