"""Grading a folder of submissions: one CSV row per (submission, exercise), bad files reported
and skipped, solutions always off.

Submissions are copies of lab 01 (the fastest lab) at its small test parameters, with answer
lines filled with values worked out here from the published figures, not by the exercises.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import nbformat
import papermill as pm
import pytest

from tests.lab_checks import lab01 as lab01_checks
from trnlab.course import grading
from trnlab.course.__main__ import main

ROOT = Path(__file__).resolve().parents[1]
LAB01 = ROOT / "labs" / "01_trainium_family.ipynb"

RIGHT = {
    # Trainium2: 667 dense BF16 TFLOPS / (8 cores x 128 x 128 PEs x 2 FLOP per MAC), in GHz.
    "clock_ghz": 667e12 / (8 * 128 * 128 * 2) / 1e9,
    # Trainium3 MXFP8 (2,517 TFLOPS) over Trainium cFP8 (at its BF16 rate, 190 TFLOPS).
    "growth": 2517e12 / 190e12,
    # trn1.32xlarge: 9.8 TB/s printed for 16 chips.
    "per_chip_gbs": 9.8e12 / 16 / 1e9,
    "trust": "'docs'",
    # Trainium3's BF16 ridge: 671 TFLOP/s over 4.9 TB/s of HBM.
    "ridge_trn3": 671e12 / 4.9e12,
}
WRONG = {
    "clock_ghz": 2.4,  # the documented clock, not the one the rating implies
    "growth": 8.0,
    "per_chip_gbs": 820,  # the chip documentation's figure, not the instance's
    "trust": "'glossary'",
    "ridge_trn3": 230,  # Trainium2's BF16 ridge: the "ridge keeps rising" reading
}
# In the order of the lab's check cells.
KEYS = ["lab01.growth", "lab01.ridge_bf16", "lab01.clock", "lab01.bandwidth", "lab01.trust"]


def _submission(path: Path, student: str, answers: dict | None = None) -> Path:
    """Lab 01 as the variants tool hands it out (parameters injected), answers filled in."""
    pm.execute_notebook(
        str(LAB01),
        str(path),
        parameters={**lab01_checks.PARAMS, "STUDENT": student},
        prepare_only=True,
        kernel_name="trnlab",
        progress_bar=False,
    )
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        for var, value in (answers or {}).items():
            cell.source = re.sub(
                rf"^{var} = None\b.*$", f"{var} = {value}", cell.source, flags=re.M
            )
    nbformat.write(nb, path)
    return path


def _read(csv_path: Path) -> list[dict]:
    with open(csv_path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.notebook
def test_a_folder_of_submissions_gives_one_row_per_exercise_and_survives_a_corrupt_file(
    tmp_path, capsys
):
    folder = tmp_path / "submissions"
    folder.mkdir()
    _submission(folder / "a_pass.ipynb", "pat", RIGHT)
    _submission(folder / "b_fail.ipynb", "fay", WRONG)
    _submission(folder / "c_untouched.ipynb", "uma")
    text = _submission(tmp_path / "whole.ipynb", "cory", RIGHT).read_text()
    (folder / "d_corrupt.ipynb").write_text(text[: len(text) // 2])  # truncated JSON

    assert main(["grade", str(folder), "--csv", str(tmp_path / "grades.csv")]) == 0
    rows = _read(tmp_path / "grades.csv")
    assert list(rows[0]) == ["file", "student", "lab", "exercise", "status", "message"]
    got = [(r["file"], r["student"], r["lab"], r["exercise"], r["status"]) for r in rows]
    assert got == [
        *[("a_pass.ipynb", "pat", "lab01", k, "passed") for k in KEYS],
        *[("b_fail.ipynb", "fay", "lab01", k, "failed") for k in KEYS],
        *[("c_untouched.ipynb", "uma", "lab01", k, "not attempted") for k in KEYS],
        ("d_corrupt.ipynb", "d_corrupt", "", "", "unreadable"),
    ]
    messages = {(r["file"], r["exercise"]): r["message"] for r in rows}
    assert messages["a_pass.ipynb", "lab01.clock"] == "correct"
    assert "documented clock (2.4 GHz)?" in messages["b_fail.ipynb", "lab01.clock"]
    # the CSV carries each check's diagnosis: the slip, how far off, the mechanism
    assert "about 40% too low" in messages["b_fail.ipynb", "lab01.growth"]
    assert "chip documentation's figure" in messages["b_fail.ipynb", "lab01.bandwidth"]
    assert "memory caught up with compute" in messages["b_fail.ipynb", "lab01.ridge_bf16"]
    assert messages["a_pass.ipynb", "lab01.ridge_bf16"].startswith("a good prediction")
    assert (
        "glossary entry also gets Trainium2's HBM wrong" in messages["b_fail.ipynb", "lab01.trust"]
    )
    assert messages["c_untouched.ipynb", "lab01.clock"].startswith("replace None")
    assert "NotJSONError" in messages["d_corrupt.ipynb", ""]
    out = capsys.readouterr().out
    assert "[1/4] a_pass.ipynb: 5 passed" in out and "[4/4] d_corrupt.ipynb: 1 unreadable" in out


@pytest.mark.notebook
def test_solutions_stay_off_and_a_raising_cell_is_an_error_not_the_end(tmp_path):
    folder = tmp_path / "submissions"
    folder.mkdir()
    # A copy of the learner lab whose own parameters cell switches the solutions on.
    nb = nbformat.read(LAB01, as_version=4)
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    params.source = params.source.replace("SOLUTIONS = False", "SOLUTIONS = True")
    params.source = params.source.replace("STRICT = False", "STRICT = True")
    nbformat.write(nb, folder / "cheat.ipynb")
    # A submission with a broken answer (NameError in the check cell) and a broken cell
    # outside the exercises; the right answers elsewhere still count.
    path = _submission(folder / "broken.ipynb", "bo", {**RIGHT, "trust": "docs"})
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.source.startswith("for s in catalog.systems():\n"))
    cell.source += '\nraise RuntimeError("my own experiment")'
    nbformat.write(nb, path)

    rows = grading.grade(folder, tmp_path / "grades.csv", timeout=120, log=None)
    got = [(r["file"], r["student"], r["exercise"], r["status"]) for r in rows]
    assert got == [
        ("broken.ipynb", "bo", "lab01.growth", "passed"),
        ("broken.ipynb", "bo", "lab01.ridge_bf16", "passed"),
        ("broken.ipynb", "bo", "lab01.clock", "passed"),
        ("broken.ipynb", "bo", "lab01.bandwidth", "passed"),
        ("broken.ipynb", "bo", "lab01.trust", "error"),
        ("broken.ipynb", "bo", "", "error"),
        *[("cheat.ipynb", "cheat", k, "not attempted") for k in KEYS],
    ]
    assert rows[4]["message"] == ("the check cell raised NameError: name 'docs' is not defined")
    assert re.fullmatch(r"cell \d+: RuntimeError: my own experiment", rows[5]["message"])
    assert _read(tmp_path / "grades.csv") == rows


def test_grade_refuses_a_missing_folder(tmp_path, capsys):
    assert main(["grade", str(tmp_path / "nowhere"), "--csv", str(tmp_path / "g.csv")]) == 2
    assert "no folder" in capsys.readouterr().err
