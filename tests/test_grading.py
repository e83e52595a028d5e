"""Grading a folder of submissions: one CSV row per (submission, exercise), bad files reported
and skipped, solutions always off.

Submissions are copies of lab 01 (the fastest lab) at its small test parameters, with answer
lines filled with values worked out from the published figures (tests/grading_helpers.py).
"""

from __future__ import annotations

import re

import nbformat
import pytest

from tests.grading_helpers import KEYS, LAB01, RIGHT, WRONG, read_csv, sandbox_or_skip, submission
from trnlab.course import grading
from trnlab.course.__main__ import main


@pytest.mark.notebook
def test_a_folder_of_submissions_gives_one_row_per_exercise_and_survives_a_corrupt_file(
    tmp_path, capsys
):
    sandbox_or_skip()
    folder = tmp_path / "submissions"
    folder.mkdir()
    # Files named as the variants tool names them; the notebooks' own STUDENT parameter lies
    # (a student can edit it): the student is taken from the file name and the roster.
    submission(folder / "01_trainium_family__pat.ipynb", "fay", RIGHT)
    submission(folder / "01_trainium_family__fay.ipynb", "pat", WRONG)
    submission(folder / "01_trainium_family__uma.ipynb", "uma")
    text = submission(tmp_path / "whole.ipynb", "cory", RIGHT).read_text()
    (folder / "01_trainium_family__cory.ipynb").write_text(text[: len(text) // 2])  # truncated
    roster = tmp_path / "roster.txt"
    roster.write_text("# section A\npat\nfay\numa\ncory\npat\n***\nzoe\n")

    csv_path = tmp_path / "grades.csv"
    assert main(["grade", str(folder), "--csv", str(csv_path), "--roster", str(roster)]) == 0
    rows = read_csv(csv_path)
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
    sandbox_or_skip()
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
    path = submission(folder / "broken.ipynb", "bo", {**RIGHT, "trust": "docs"})
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
    assert read_csv(tmp_path / "grades.csv") == rows


def test_grade_refuses_a_missing_folder(tmp_path, capsys):
    assert main(["grade", str(tmp_path / "nowhere"), "--csv", str(tmp_path / "g.csv")]) == 2
    assert "no folder" in capsys.readouterr().err
