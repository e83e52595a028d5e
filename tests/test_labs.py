"""Every lab, run by papermill at small parameters, in two modes:

- solutions: untouched exercises are filled with the reference answers and strict mode is
  on, so every check must pass;
- learner: exercises left as ``None`` must report "not attempted" and nothing may fail.

Each lab publishes its key numbers (``trnlab.exercises.publish``); ``tests/lab_checks/labNN.py``
asserts on them with values derived independently, and gives the lab's small parameters.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import nbformat
import papermill as pm
import pytest

from trnlab.exercises import read_published

ROOT = Path(__file__).resolve().parents[1]
LABS = sorted((ROOT / "labs").glob("[0-9][0-9]_*.ipynb"))
KERNEL = "trnlab"


def _checks(lab: Path):
    name = f"tests.lab_checks.lab{lab.stem[:2]}"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        pytest.fail(f"{lab.name}: add {name.replace('.', '/')}.py with PARAMS and check(values)")


def _run(lab: Path, out: Path, solutions: bool) -> dict:
    params = {**_checks(lab).PARAMS, "SOLUTIONS": solutions, "STRICT": True}
    pm.execute_notebook(
        str(lab),
        str(out),
        parameters=params,
        kernel_name=KERNEL,
        cwd=str(lab.parent),
        progress_bar=False,
        store_widget_state=False,
    )
    return read_published(out)


@pytest.mark.notebook
@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_lab_with_reference_solutions_passes_every_check(lab, tmp_path):
    bundle = _run(lab, tmp_path / lab.name, solutions=True)
    assert len(bundle["exercises"]) >= 3, "each lab has at least three exercises"
    assert set(bundle["exercises"].values()) == {"passed"}, bundle["exercises"]
    _checks(lab).check(bundle["values"])
    out = json.loads((tmp_path / lab.name).read_text())
    assert "widgets" not in out.get("metadata", {}), "papermill must not store widget state"


@pytest.mark.notebook
@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_lab_untouched_reports_not_attempted(lab, tmp_path):
    bundle = _run(lab, tmp_path / lab.name, solutions=False)
    assert set(bundle["exercises"].values()) == {"not attempted"}, bundle["exercises"]


@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_committed_lab_follows_the_course_conventions(lab):
    nb = nbformat.read(lab, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    counts = [c.execution_count for c in code]
    assert None not in counts, "committed labs are executed"
    assert counts == sorted(counts) and counts[0] == 1, "executed top to bottom, once"
    assert any("parameters" in c.metadata.get("tags", []) for c in code)
    assert "widgets" not in nb.metadata, "strip widget state (scripts/run_labs.py)"
    assert nb.metadata["kernelspec"]["name"] == KERNEL
    for c in code:
        assert not any(o.get("output_type") == "error" for o in c.outputs)
    text = "\n".join(c.source for c in nb.cells)
    assert "What you will learn" in text and "Time needed" in text and "## Summary" in text
    assert "/work/" not in text and "/home/" not in text and "/tmp/" not in text
    assert "# NBVAL_CHECK_OUTPUT" in text, "key numbers are checked by nbval"
