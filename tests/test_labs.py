"""Every lab, run by papermill at small parameters, in two modes:

- solutions: untouched exercises are filled with the reference answers and strict mode is
  on, so every check must pass;
- learner: exercises left as ``None`` must report "not attempted" and nothing may fail.

Each lab publishes its key numbers (``trnlab.exercises.publish``); the checks below assert on
them with values derived independently here. A lab without an entry in ``CHECKS`` fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import papermill as pm
import pytest

from trnlab.exercises import read_published

ROOT = Path(__file__).resolve().parents[1]
LABS = sorted((ROOT / "labs").glob("[0-9][0-9]_*.ipynb"))
KERNEL = "trnlab"


def check_lab01(values: dict) -> None:
    # 667 TFLOPS / (8 cores x 128 x 128 PEs x 2 FLOP) = 2.544 GHz
    assert values["trn2_clock_implied_ghz"] == pytest.approx(
        667e12 / (8 * 128 * 128 * 2) / 1e9, abs=1e-4
    )
    assert abs(values["trn2_48xlarge_fp8_pf"] - 20.8) <= 0.05
    assert abs(values["trn3_gen2_mxfp8_pf"] - 362) <= 1
    # Every printed total agrees except trn1.32xlarge's 9.8 TB/s.
    assert values["totals_compared"] - values["totals_agreeing"] == 1


def check_lab05(values: dict) -> None:
    assert values["e5m2_max"] == 57344.0  # 1.75 x 2^15
    assert values["mx_scale_for_100"] == 0.25  # 2^(floor(log2 100) - 8)
    # FP16 near 1024 has a step of 1: 1024.5 ties to even 1024, every time.
    assert values["fp16_rne_final"] == 1024.0
    assert values["fp16_sr_mean_final"] == pytest.approx(1024 + 0.5 * values["n_add"], rel=0.03)
    # BF16 near 1.0 has a step of 2^-7: +0.001 is lost with round-to-nearest.
    assert values["bf16_rne_weight"] == 1.0
    assert values["bf16_sr_weight_mean"] == pytest.approx(1 + 1e-3 * values["steps"], rel=0.05)
    assert values["snr_bf16_db"] > 45 and 10 < values["snr_mxfp4_db"] < 20


def check_lab06(values: dict) -> None:
    assert values["patterns"] == 7  # 4:16, 4:12, 4:8, 2:8, 2:4, 1:4, 1:2
    assert values["error_4_16"] < values["error_1_4"]
    assert values["trn2_fp8_sparse_pf"] == pytest.approx(4 * 1.299, rel=1e-3)
    assert values["trn3_mxfp8_error"] < values["trn3_sparse_bf16_error"] / 5


# Small, fast parameters for each lab (instructors use the defaults).
SMALL: dict[str, dict] = {
    "01_trainium_family": {"CHIPS": ["trn1", "trn2", "trn3"], "COMPARE_WITH": ["h100"]},
    "05_numeric_formats": {"SIZE": 64, "N_ADD": 512, "STEPS": 300},
    "06_sparsity": {"SIZE": 64},
}
CHECKS = {
    "01_trainium_family": check_lab01,
    "05_numeric_formats": check_lab05,
    "06_sparsity": check_lab06,
}


def _run(lab: Path, out: Path, solutions: bool) -> dict:
    params = {**SMALL.get(lab.stem, {}), "SOLUTIONS": solutions, "STRICT": True}
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
    assert lab.stem in CHECKS, f"{lab.name}: add its published values to CHECKS in {__file__}"
    bundle = _run(lab, tmp_path / lab.name, solutions=True)
    assert len(bundle["exercises"]) >= 3, "each lab has at least three exercises"
    assert set(bundle["exercises"].values()) == {"passed"}, bundle["exercises"]
    CHECKS[lab.stem](bundle["values"])
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
