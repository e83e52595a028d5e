"""Compile trnlab's numba kernels once, into numba's on-disk cache (``cache=True``).

Run by the set-up (``make env``) and again by ``make warm`` after a numba module changes, so a
fresh machine compiles at set-up rather than in the first lab cell, the classroom app's first
page, or in each of the test suite's parallel workers at once. Every later process (a notebook
kernel, a Voila kernel, a pytest worker) loads the compiled code from the cache.

numba compiles one machine-code version per argument *type signature*; each step below is the
smallest use of a public function that reaches its kernels with the types the course passes
(float32 data, uint8/int8/uint16 codes, every format, both roundings). A signature missed here is
compiled, and cached, on its first use instead: slower once, never wrong.

    .venv/bin/python scripts/warm_numba.py      # prints the seconds each step took
"""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np


def _formats() -> None:
    from trnlab import formats

    x = formats.sample("gaussian", (4, 64), seed=0)
    for name in formats.formats():
        for rounding in ("nearest", "stochastic"):
            try:
                for saturate in (False, True):
                    formats.quantize(x, name, rounding=rounding, seed=1, saturate=saturate)
                formats.decode(formats.encode(x, name, rounding=rounding, seed=1))
            except ValueError:  # an MX element type alone (int8_mx) is refused by design
                break
    for rule in ("ocp", "trainium3"):
        formats.quantize(x, "mxfp8_e4m3", scale_rule=rule)


def _sparsity() -> None:
    from trnlab import formats

    w = formats.sample("gaussian", (8, 16), seed=0)
    for n, m in ((2, 4), (1, 4), (4, 8)):
        formats.prune(w, n, m)


def _core() -> None:
    from trnlab import kernels

    a = np.ones((128, 256), np.float32)
    b = np.ones((256, 512), np.float32)
    for numerics in (True, False):
        kernels.matmul(a, b, variant="tiled", dtype="bf16", numerics=numerics)


def _fabric() -> None:
    from trnlab import fabric

    fabric.collective("all_reduce", 1 << 20, system="trn2.48xlarge", algorithm="ring",
                      simulate=True)  # fmt: skip


def _dashboards() -> None:
    """The classroom app's dashboards (apps/dashboards.ipynb) at its own settings."""
    from trnlab.widgets import (
        ChipExplorer,
        CollectiveExplorer,
        FormatExplorer,
        MatmulStepper,
        ScaleExplorer,
    )

    ChipExplorer(metric="peak.fp8")
    FormatExplorer(size=64, chip="trn2")
    MatmulStepper(chip="trn1", m=256, k=512, n=1024, variant="tiled")
    CollectiveExplorer(system="trn2.48xlarge", op="all_reduce", algorithm="ring", ring_chips=4)
    ScaleExplorer(model="llama3-70b", system="trn2-ultraserver")


STEPS = {
    "formats: every format, both roundings": _formats,
    "formats: N:M pruning": _sparsity,
    "core: dependencies and engine scheduler": _core,
    "fabric: chunk-level simulation": _fabric,
    "the classroom app's dashboards": _dashboards,
}


def main() -> int:
    warnings.simplefilter("ignore")  # numba's performance hints are for kernel authors
    total = time.perf_counter()
    for name, step in STEPS.items():
        t0 = time.perf_counter()
        step()
        print(f"warm numba cache: {name}: {time.perf_counter() - t0:.1f} s")
    print(f"warm numba cache: done in {time.perf_counter() - total:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
