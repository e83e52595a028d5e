"""Grading a folder of submissions: one CSV row per (submission, exercise), bad files reported
and skipped, solutions always off.

Submissions are copies of lab 01 (the fastest lab) at its small test parameters, with answer
lines filled with values worked out from the published figures (tests/grading_helpers.py).
"""

from __future__ import annotations

import json
import re

import nbformat
import pytest

from tests.grading_helpers import (
    KEYS,
    LAB01,
    RIGHT,
    WRONG,
    load_scaled,
    read_csv,
    sandbox_or_skip,
    submission,
)
from tests.lab_checks import lab01 as lab01_checks
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

    rows = grading.grade(folder, tmp_path / "grades.csv", timeout=load_scaled(120), log=None)
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


# Dense BF16 chip rating / (cores x 128 x 128 PEs x 2 FLOP per MAC), in GHz.
CLOCK_GHZ = {"trn1": 190e12 / (2 * 128 * 128 * 2) / 1e9, "trn3": 671e12 / (8 * 128 * 128 * 2) / 1e9}


@pytest.mark.notebook
def test_a_manifest_grades_the_assigned_variant_and_only_its_students(tmp_path, capsys):
    sandbox_or_skip()
    from trnlab.course import variants

    out = tmp_path / "variants"
    manifest = variants.make_variants(LAB01, ["ann", "ben"], 3, out, {"CLOCK_CHIP": "trn1"})
    assert manifest == {"ann": {"CLOCK_CHIP": "trn1"}, "ben": {"CLOCK_CHIP": "trn1"}}
    data = json.loads((out / "manifest.json").read_text())
    data["students"]["ghost"] = {"student": "ghost", "file": "x.ipynb", "CLOCK_CHIP": "trn9"}
    (out / "manifest.json").write_text(json.dumps(data))
    folder = tmp_path / "submissions"
    folder.mkdir()
    # ann answers her own variant (trn1); ben edits his notebook's metadata to trn3 and
    # answers for trn3: he is graded on trn1, as assigned.
    for student, chip in (("ann", "trn1"), ("ben", "trn3")):
        path = folder / f"01_trainium_family__{student}.ipynb"
        params = {**lab01_checks.PARAMS, "CLOCK_CHIP": chip}
        submission(path, student, {"clock_ghz": CLOCK_GHZ[chip]}, parameters=params)
    submission(folder / "01_trainium_family__carl.ipynb", "carl", RIGHT)  # not in the manifest

    argv = ["grade", str(folder), "--csv", str(tmp_path / "g.csv")]
    assert main([*argv, "--manifest", str(out / "manifest.json")]) == 0
    rows = {(r["student"], r["file"], r["exercise"]): r for r in read_csv(tmp_path / "g.csv")}
    assert rows["ann", "01_trainium_family__ann.ipynb", "lab01.clock"]["status"] == "passed"
    ben = rows["ben", "01_trainium_family__ben.ipynb", "lab01.clock"]
    assert ben["status"] == "failed"
    carl = rows["", "01_trainium_family__carl.ipynb", ""]
    assert carl["status"] == "error" and "matches no student of manifest.json" in carl["message"]
    assert len(rows) == 2 * 4 + 1
    out = capsys.readouterr().out
    assert "manifest.json: student 'ghost': CLOCK_CHIP = 'trn9' is not a variant" in out


def test_the_time_budget_stops_new_notebooks_and_the_csv_is_still_written(tmp_path, capsys):
    sandbox_or_skip()
    folder = tmp_path / "submissions"
    folder.mkdir()
    for student in ("ann", "ben"):
        submission(folder / f"{student}.ipynb", student, RIGHT)
    rows = grading.grade(
        folder, tmp_path / "g.csv", lab="01", budget=0.01, progress_bar=True, log=print
    )
    assert [(r["student"], r["status"], r["message"]) for r in rows] == [
        (s, "error", "not graded: the grading's time budget ran out") for s in ("ann", "ben")
    ]
    assert read_csv(tmp_path / "g.csv") == rows
    captured = capsys.readouterr()
    assert "[##############################] 2/2 notebooks" in captured.err
