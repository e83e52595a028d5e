"""trnlab: a Jupyter-first lab and visual explorer for AWS Trainium.

Importing ``trnlab`` is light: subpackages load on first use (``trnlab.catalog``,
``trnlab.formats``, ``trnlab.core``, ``trnlab.nki``, ``trnlab.kernels``, ``trnlab.fabric``,
``trnlab.scale``, ``trnlab.exercises``), numba kernels compile on first call and are cached
on disk, and the dashboards (``trnlab.widgets``) are imported only when asked for.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
__all__ = [
    "__version__",
    "catalog",
    "core",
    "exercises",
    "fabric",
    "formats",
    "kernels",
    "nki",
    "scale",
    "units",
    "widgets",
]

_LAZY = {
    "catalog",
    "core",
    "exercises",
    "fabric",
    "formats",
    "kernels",
    "nki",
    "scale",
    "units",
    "widgets",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module(f"trnlab.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'trnlab' has no attribute {name!r}")
