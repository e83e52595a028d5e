"""Wall time of lab 01 run end to end by papermill (defaults, learner edition)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import papermill as pm

LAB = Path(__file__).resolve().parents[1] / "labs" / "01_trainium_family.ipynb"


def run() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        pm.execute_notebook(
            str(LAB),
            str(Path(tmp) / LAB.name),
            kernel_name="trnlab",
            cwd=str(LAB.parent),
            progress_bar=False,
            store_widget_state=False,
        )
        return {"lab01_papermill_s": round(time.perf_counter() - t0, 2)}
