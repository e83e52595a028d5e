"""Grading a folder of submissions: one CSV row per (submission, exercise), bad files reported
and skipped, solutions always off.

Submissions are copies of lab 01 (the fastest lab) at its small test parameters, with answer
lines filled with values worked out here from the published figures, not by the exercises.
"""

from __future__ import annotations

import csv
import os
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
}
WRONG = {
    "clock_ghz": 2.4,  # the documented clock, not the one the rating implies
    "growth": 8.0,
    "per_chip_gbs": 820,  # the chip documentation's figure, not the instance's
    "trust": "'glossary'",
}
KEYS = ["lab01.clock", "lab01.growth", "lab01.bandwidth", "lab01.trust"]


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


def _sandbox_or_skip() -> None:
    """The grader refuses to run without a sandbox; these tests need bubblewrap (CI has it)."""
    from trnlab.course import sandbox

    try:
        sandbox.open_sandbox()
    except sandbox.SandboxUnavailable as err:
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
            raise
        pytest.skip(str(err))


@pytest.mark.notebook
def test_a_folder_of_submissions_gives_one_row_per_exercise_and_survives_a_corrupt_file(
    tmp_path, capsys
):
    _sandbox_or_skip()
    folder = tmp_path / "submissions"
    folder.mkdir()
    # Files named as the variants tool names them; the notebooks' own STUDENT parameter lies
    # (a student can edit it): the student is taken from the file name and the roster.
    _submission(folder / "01_trainium_family__pat.ipynb", "fay", RIGHT)
    _submission(folder / "01_trainium_family__fay.ipynb", "pat", WRONG)
    _submission(folder / "01_trainium_family__uma.ipynb", "uma")
    text = _submission(tmp_path / "whole.ipynb", "cory", RIGHT).read_text()
    (folder / "01_trainium_family__cory.ipynb").write_text(text[: len(text) // 2])  # truncated
    roster = tmp_path / "roster.txt"
    roster.write_text("# section A\npat\nfay\numa\ncory\npat\n***\nzoe\n")

    csv_path = tmp_path / "grades.csv"
    assert main(["grade", str(folder), "--csv", str(csv_path), "--roster", str(roster)]) == 0
    rows = _read(csv_path)
    assert list(rows[0]) == ["file", "student", "lab", "exercise", "status", "message"]
    got = [(r["file"], r["student"], r["lab"], r["exercise"], r["status"]) for r in rows]
    name = "01_trainium_family__{}.ipynb".format
    assert got == [
        (name("cory"), "cory", "", "", "unreadable"),
        *[(name("fay"), "fay", "lab01", k, "failed") for k in KEYS],
        *[(name("pat"), "pat", "lab01", k, "passed") for k in KEYS],
        *[(name("uma"), "uma", "lab01", k, "not attempted") for k in KEYS],
    ]
    messages = {(r["student"], r["exercise"]): r["message"] for r in rows}
    assert messages["pat", "lab01.clock"] == "correct"
    assert "documented clock?" in messages["fay", "lab01.clock"]
    assert "glossary entry also gets Trainium2's HBM wrong" in messages["fay", "lab01.trust"]
    assert messages["uma", "lab01.clock"].startswith("replace None")
    assert "NotJSONError" in messages["cory", ""]
    out = capsys.readouterr().out
    assert re.search(r"\[\d/4\] 01_trainium_family__pat\.ipynb: 4 passed", out)
    assert re.search(r"\[\d/4\] 01_trainium_family__cory\.ipynb: 1 unreadable", out)
    # Bad roster rows are reported and skipped, never turned into students.
    assert "line 6: 'pat' and 'pat' would get the same notebook file" in out
    assert "line 7: '***' has no letters or digits" in out
    assert "no submission from 1 of the roster: zoe" in out


@pytest.mark.notebook
def test_solutions_stay_off_and_a_raising_cell_is_an_error_not_the_end(tmp_path):
    _sandbox_or_skip()
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
        ("broken.ipynb", "broken", "lab01.clock", "passed"),
        ("broken.ipynb", "broken", "lab01.growth", "passed"),
        ("broken.ipynb", "broken", "lab01.bandwidth", "passed"),
        ("broken.ipynb", "broken", "lab01.trust", "error"),
        ("broken.ipynb", "broken", "", "error"),
        *[("cheat.ipynb", "cheat", k, "not attempted") for k in KEYS],
    ]
    assert rows[3]["message"] == ("the check cell raised NameError: name 'docs' is not defined")
    assert re.fullmatch(r"cell \d+: RuntimeError: my own experiment", rows[4]["message"])
    assert _read(tmp_path / "grades.csv") == rows


def test_grade_refuses_a_missing_folder(tmp_path, capsys):
    assert main(["grade", str(tmp_path / "nowhere"), "--csv", str(tmp_path / "g.csv")]) == 2
    assert "no folder" in capsys.readouterr().err
