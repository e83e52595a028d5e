"""Wall time of every lab run end to end by papermill, at its default parameters, in both
editions (learner: exercises untouched; instructor: every exercise answered), one at a time.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import papermill as pm

ROOT = Path(__file__).resolve().parents[1]
EDITIONS = {"learner": ROOT / "labs", "instructor": ROOT / "instructor"}


def _run(lab: Path, out: Path) -> float:
    t0 = time.perf_counter()
    pm.execute_notebook(
        str(lab),
        str(out),
        kernel_name="trnlab",
        cwd=str(lab.parent),
        progress_bar=False,
        store_widget_state=False,
    )
    return time.perf_counter() - t0


def run() -> dict:
    figures: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for edition, folder in EDITIONS.items():
            per_lab = {
                lab.stem[:2]: round(_run(lab, Path(tmp) / lab.name), 2)
                for lab in sorted(folder.glob("[0-9][0-9]_*.ipynb"))
            }
            figures[f"{edition}_per_lab_s"] = per_lab
            figures[f"{edition}_total_s"] = round(sum(per_lab.values()), 1)
    return figures
