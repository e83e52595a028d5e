"""How long ``import trnlab`` (and the catalogue's first use) takes in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

_PROBE = """
import sys, time
t0 = time.perf_counter()
import trnlab
t1 = time.perf_counter()
trnlab.catalog.system("trn2.48xlarge").peak_flops("fp8")
t2 = time.perf_counter()
heavy = sorted(m for m in ("numba", "plotly", "ipywidgets", "llvmlite") if m in sys.modules)
print(t1 - t0, t2 - t1, ",".join(heavy))
"""


def run(repeats: int = 5) -> dict:
    imports, catalogue = [], []
    heavy = ""
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True
        )
        a, b, heavy = [*out.stdout.split(), ""][:3]
        imports.append(float(a))
        catalogue.append(float(b))
    return {
        "import_trnlab_s_median": round(sorted(imports)[repeats // 2], 4),
        "first_catalogue_query_s_median": round(sorted(catalogue)[repeats // 2], 4),
        "heavy_modules_loaded_by_import": heavy or "none",
    }
