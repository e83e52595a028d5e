"""Lab 00 (welcome): parameters and checks on its published values, derived from the
notebooks on disk and from hardware facts, not from trnlab.course.syllabus."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

#: Lab 00 is small already.
PARAMS: dict = {}

LABS = Path(__file__).resolve().parents[2] / "labs"
TIME_NEEDED = re.compile(r"Time needed:?\**:?\s*about\s+(\d+)\s+minutes", re.IGNORECASE)


def _opening(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    return next(c.source for c in nb.cells if c.cell_type == "markdown")


def check(values: dict) -> None:
    labs = sorted(LABS.glob("[0-9][0-9]_*.ipynb"))
    assert values["labs"] == len(labs)
    # The course's length is the sum of every notebook's own "Time needed: about N minutes".
    minutes = [int(TIME_NEEDED.search(_opening(p)).group(1)) for p in labs]
    assert values["total_minutes"] == sum(minutes)
    # trn2.48xlarge: 16 Trainium2 chips x 1,299 TFLOP/s dense FP8 (AWS prints 20.8 PF);
    # 16 chips x 8 NeuronCore-v3.
    assert values["trn2_48xlarge_fp8_pf"] == pytest.approx(16 * 1299e12 / 1e15, abs=0.01)
    assert values["trn2_48xlarge_cores"] == 16 * 8
    assert values["trn3_hbm_gib"] == pytest.approx(144, abs=0.1)  # Trainium3: 144 GiB HBM3e
    # The lab about MX blocks is the one whose heading mentions them.
    [mx] = [p for p in labs if "MX" in _opening(p).splitlines()[0]]
    assert values["mx_lab"] == int(mx.name[:2])
    assert values["environment_checks"] >= 10
