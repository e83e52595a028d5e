"""``import trnlab`` stays light: no numba compilation, no dashboards, no plotting."""

from __future__ import annotations

import subprocess
import sys


def _loaded_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_import_trnlab_loads_no_heavy_module():
    mods = _loaded_after("import trnlab")
    assert not mods & {"numba", "llvmlite", "plotly", "ipywidgets", "trnlab.widgets"}


def test_catalogue_use_loads_no_compiler_or_dashboard():
    mods = _loaded_after("import trnlab\ntrnlab.catalog.chip('trn2').peak_flops('fp8')")
    assert "trnlab.catalog" in mods
    assert not mods & {"numba", "llvmlite", "plotly", "ipywidgets"}
