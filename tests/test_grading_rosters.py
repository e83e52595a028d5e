"""Rosters and manifests for grading: read strictly, bad rows reported and skipped, students
matched to files by name only; and the grade command's checks that run before any notebook."""

from __future__ import annotations

import json

import pytest

from tests.grading_helpers import read_csv
from trnlab.course import grading, submissions
from trnlab.course.__main__ import main


def _manifest(tmp_path, students, lab="01_trainium_family.ipynb"):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"lab": lab, "seed": 7, "space": {}, "students": students}))
    return path


def test_a_roster_reports_unusable_lines_and_keeps_the_rest(tmp_path):
    path = tmp_path / "roster.txt"
    path.write_text("pat\n\n# comment\nAda Lovelace  # late\npat\n--\nada lovelace\nbell\x07\n")
    roster = submissions.read_roster(path)
    assert [s.name for s in roster.students] == ["pat", "Ada Lovelace", "ada lovelace"]
    assert len(roster.problems) == 3
    assert roster.problems[0].startswith("line 5: 'pat' and 'pat'")
    assert roster.problems[1].startswith("line 6: '--' has no letters or digits")
    assert roster.problems[2].startswith("line 8: 'bell\\x07' holds control characters")
    (tmp_path / "empty.txt").write_text("# nobody\n")
    with pytest.raises(submissions.RosterError, match="no students"):
        submissions.read_roster(tmp_path / "empty.txt")


def test_files_are_matched_to_students_by_name_never_by_content(tmp_path):
    path = tmp_path / "roster.txt"
    path.write_text("pat\nAda Lovelace\n")
    roster = submissions.read_roster(path)
    assert roster.match("01_trainium_family__pat.ipynb").name == "pat"
    assert roster.match("pat.ipynb").name == "pat"
    assert roster.match("1234_01_trainium_family__Ada_Lovelace.ipynb").name == "Ada Lovelace"
    assert roster.match("patricia.ipynb") is None
    assert roster.match("01_trainium_family__mallory.ipynb") is None
    assert submissions.student_from_filename("01_trainium_family__pat.ipynb") == "pat"
    assert submissions.student_from_filename("my_work.ipynb") == "my_work"


def test_a_manifest_is_checked_against_the_labs_own_variant_space(tmp_path):
    path = _manifest(
        tmp_path,
        {
            "pat": {
                "student": "pat",
                "file": "01_trainium_family__pat.ipynb",
                "CLOCK_CHIP": "trn1",
            },
            "fay": {
                "student": "fay",
                "file": "01_trainium_family__fay.ipynb",
                "CLOCK_CHIP": "h100",
            },
            "uma": {"student": "uma", "file": "../elsewhere.ipynb", "CLOCK_CHIP": "trn2"},
            "cory": {
                "student": "cory",
                "file": "01_trainium_family__pat.ipynb",
                "CLOCK_CHIP": "trn3",
            },
            "zoe": {"student": "zoe", "file": "z.ipynb", "CLOCK_CHIP": "trn2", "EXTRA": 1},
            "ann": {"student": "ann", "file": "a.ipynb"},
            "bob": "not an entry",
        },
    )
    roster = submissions.read_manifest(path)
    assert roster.lab == "lab01"
    assert [(s.name, s.file, s.variant) for s in roster.students] == [
        ("pat", "01_trainium_family__pat.ipynb", {"CLOCK_CHIP": "trn1"})
    ]
    problems = "\n".join(roster.problems)
    assert "student 'fay': CLOCK_CHIP = 'h100' is not a variant" in problems
    assert "student 'uma': 'file' must be a notebook file name" in problems
    assert "file 01_trainium_family__pat.ipynb is already 'pat''s" in problems
    assert "'EXTRA' is not a variant parameter of lab01" in problems
    assert "student 'ann': no value for CLOCK_CHIP" in problems
    assert "student 'bob': expected an object" in problems
    assert len(roster.problems) == 6


def test_a_manifest_of_the_wrong_shape_is_refused(tmp_path):
    bad = tmp_path / "bad.json"
    for text, says in (
        ("{not json", "is not JSON"),
        ('["a list"]', "not a variants manifest"),
        ('{"lab": "zz.ipynb", "students": {}}', "'lab'"),
    ):
        bad.write_text(text)
        with pytest.raises(submissions.RosterError, match=says):
            submissions.read_manifest(bad)
    with pytest.raises(submissions.RosterError, match="no usable student entries"):
        submissions.read_manifest(_manifest(tmp_path, {"x": {"file": "x.ipynb"}}))


def test_the_variants_csv_manifest_reads_back_typed(tmp_path):
    path = tmp_path / "manifest.csv"
    path.write_text(
        "student,file,M,K,N\n"
        "pat,03_tiled_matmul__pat.ipynb,256,512,1024\n"
        "fay,03_tiled_matmul__fay.ipynb,250,512,1024\n"
    )
    roster = submissions.read_manifest(path)
    assert roster.lab == "lab03"
    assert [(s.name, s.variant) for s in roster.students] == [
        ("pat", {"M": 256, "K": 512, "N": 1024})
    ]
    assert roster.problems[0].startswith("row 3 ('fay'): M = '250' is not a variant")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--timeout", "0"], "--timeout: must be more than 0"),
        (["--timeout", "-5"], "--timeout: must be more than 0"),
        (["--timeout", "nan"], "--timeout: must be more than 0"),
        (["--notebook-timeout", "0"], "--notebook-timeout: must be more than 0"),
        (["--budget", "inf"], "--budget: must be more than 0"),
        (["--jobs", "0"], "--jobs: must be at least 1"),
    ],
)
def test_bad_options_stop_the_command_before_anything_runs(tmp_path, capsys, argv, says):
    with pytest.raises(SystemExit) as stop:
        main(["grade", str(tmp_path), "--csv", str(tmp_path / "g.csv"), *argv])
    assert stop.value.code == 2
    assert says in capsys.readouterr().err


@pytest.fixture
def nothing_may_run(monkeypatch):
    """Fail the test if a sandbox is started: these arguments must be refused before."""

    def run(*args, **kwargs):
        raise AssertionError("a sandbox ran before the arguments were checked")

    monkeypatch.setattr(grading.sb.Sandbox, "run", run)


def test_bad_paths_manifests_labs_and_kernels_are_refused_first(tmp_path, capsys, nothing_may_run):
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "a.ipynb").write_text("{}")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    cases = [
        (["--csv", str(blocker / "grades.csv")], "cannot write the CSV"),
        (["--csv", str(tmp_path)], "is a folder"),
        (["--csv", str(folder / "grades.ipynb")], "would be read as a submission"),
        (["--manifest", str(tmp_path / "missing.json")], "cannot read"),
        (["--lab", "lab77"], "there are no exercises for lab77"),
        (["--lab", "zz"], "is not a course lab"),
        (["--kernel", "no-such-kernel"], "no Jupyter kernel 'no-such-kernel'"),
    ]
    for extra, says in cases:
        argv = ["grade", str(folder), "--csv", str(tmp_path / "g.csv"), *extra]
        assert main(argv) == 2, extra
        assert says in capsys.readouterr().err, extra
    assert not (tmp_path / "g.csv").exists()


def test_without_bubblewrap_the_grader_refuses_unless_told(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(grading.sb.shutil, "which", lambda name: None)
    folder = tmp_path / "subs"
    folder.mkdir()
    assert main(["grade", str(folder), "--csv", str(tmp_path / "g.csv")]) == 2
    err = capsys.readouterr().err
    assert "bubblewrap (bwrap) is not installed" in err and "--unsafe-no-sandbox" in err
    # Told so, it grades (an empty folder: nothing runs) and says it is unsafe.
    argv = ["grade", str(folder), "--csv", str(tmp_path / "g.csv"), "--unsafe-no-sandbox"]
    assert main(argv) == 0
    assert "WARNING: grading without a sandbox" in capsys.readouterr().out
    assert (tmp_path / "g.csv").read_text().strip() == ",".join(grading.COLUMNS)


def test_links_and_folders_among_the_submissions_are_not_read(tmp_path, capsys):
    folder = tmp_path / "subs"
    folder.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("instructor only: not JSON")
    (folder / "link.ipynb").symlink_to(secret)
    (folder / "dir.ipynb").mkdir()
    argv = ["grade", str(folder), "--csv", str(tmp_path / "g.csv"), "--unsafe-no-sandbox"]
    assert main(argv) == 0
    rows = read_csv(tmp_path / "g.csv")
    assert [(r["file"], r["status"]) for r in rows] == [
        ("dir.ipynb", "unreadable"),
        ("link.ipynb", "unreadable"),
    ]
    assert all("not a regular file" in r["message"] for r in rows)
    assert "instructor only" not in (tmp_path / "g.csv").read_text()
