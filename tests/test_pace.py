"""The pacing model (trnlab/course/pace.py): it counts what a learner does in a notebook, each
committed lab's stated time lies within the model's band, and the CLI prints a row per lab."""

from __future__ import annotations

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from trnlab.course import pace, syllabus

COURSE = syllabus.course_map()


def _timed(cell, start: str, end: str):
    cell.metadata["execution"] = {
        "iopub.execute_input": start,
        "iopub.status.busy": start,
        "iopub.status.idle": end,
        "shell.execute_reply": end,
    }
    return cell


def _synthetic():
    """A tiny lab: 2 markdown cells, 4 code cells, 2 exercises, a dashboard used twice, a chart."""
    md1 = new_markdown_cell(
        "# Lab 99 — A test\n\nRead these **seven** words, please, carefully now."
    )
    md2 = new_markdown_cell("| a | b |\n|---|---|\n| 1 | 2 |")
    run = _timed(
        new_code_cell("x = 1\n\n# a comment line\nprint(x)"),
        "2026-01-01T00:00:00.000000Z",
        "2026-01-01T00:00:30.000000Z",
    )
    run.outputs = [new_output("stream", name="stdout", text="1\n2\n3\n")]
    exercise = new_code_cell(
        "a = None\nlab99.number.check(a)\nlab99.guess.check(a)\nexplorer = Explorer(1)"
    )
    again = new_code_cell("Explorer(2)")
    chart = _timed(
        new_code_cell("fig.show()"),
        "2026-01-01T00:01:00.000000Z",
        "2026-01-01T00:01:06.000000Z",
    )
    chart.outputs = [new_output("display_data", data={"application/vnd.plotly.v1+json": {}})]
    return new_notebook(cells=[md1, run, md2, exercise, again, chart])


RATES = pace.Rates(
    words_per_minute=10.0,
    minutes_per_cell=1.0,
    seconds_per_line=60.0,
    seconds_per_output_line=30.0,
    exercise={"numeric": 4.0, "predict": 5.0, "choice": 2.0, "kernel": 30.0},
    dashboard_first=6.0,
    dashboard_again=3.0,
    chart=2.0,
    band=0.25,
)


def test_the_model_counts_a_small_notebook_by_hand():
    kinds = {"number": "numeric", "guess": "predict"}
    e = pace.estimate(
        _synthetic(),
        dashboards=("Explorer",),
        kind_of=lambda module, name: kinds[name],
        r=RATES,
    )
    # words (Markdown marks "#", "—", "|", "|---|" are not words): "Lab 99 A test" (4) +
    # "Read these **seven** words, please, carefully now." (7) + the table's a, b, 1, 2 (4)
    assert e.words == 15
    assert e.reading == pytest.approx(1.5)
    # 4 code cells; non-blank lines 3 + 4 + 1 + 1 = 9; printed lines 3; 30 s + 6 s run
    assert e.code_cells == 4
    assert e.run_seconds == pytest.approx(36.0)
    assert e.running == pytest.approx(4 * 1.0 + 9 * 1.0 + 3 * 0.5 + 36 / 60)
    assert e.kinds == {"numeric": 1, "predict": 1}
    assert e.exercises == pytest.approx(4.0 + 5.0)
    assert e.dashboards == pytest.approx(6.0 + 3.0)  # first use, then again
    assert e.charts == pytest.approx(2.0)
    assert e.minutes == pytest.approx(1.5 + 15.1 + 9.0 + 9.0 + 2.0)


def test_an_unexecuted_notebook_counts_no_run_time_and_no_chart():
    nb = _synthetic()
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs = []
    e = pace.estimate(nb, dashboards=("Explorer",), kind_of=lambda m, n: "choice", r=RATES)
    assert e.run_seconds == 0 and e.charts == 0 and e.kinds == {"choice": 2}


def test_expected_minutes_per_kind_add_the_share_of_a_second_attempt(tmp_path):
    text = pace.DATA.read_text(encoding="utf-8")
    r = pace.load_rates(pace.DATA)
    # numeric: 2.5 first + 0.5 x 1.5 retry; predict: 2 + 0.5 x 1 + 1.5 explanation
    assert r.exercise["numeric"] == pytest.approx(2.5 + 0.5 * 1.5)
    assert r.exercise["predict"] == pytest.approx(2.0 + 0.5 * 1.0 + 1.5)
    assert r.exercise["kernel"] == pytest.approx(20.0 + 1.0 * 10.0)
    bad = tmp_path / "pace.toml"
    bad.write_text(text.replace("[exercise.kernel]", "[exercise.other]"), encoding="utf-8")
    with pytest.raises(ValueError, match="kernel"):
        pace.load_rates(bad)


def test_exercise_kinds_of_the_labs():
    from trnlab.exercises import lab00, lab04, lab05, lab06, lab07

    assert pace.exercise_kind(lab04.softmax) == "puzzle"
    assert pace.exercise_kind(lab05.correct_matmul) == "kernel"
    assert pace.exercise_kind(lab05.predict_tiled) == "predict"
    assert pace.exercise_kind(lab06.rne_sum) == "predict"
    assert pace.exercise_kind(lab00.instance_peak) == "numeric"
    assert pace.exercise_kind(lab07.best_pattern) == "choice"


@pytest.mark.parametrize("lab", COURSE.labs, ids=lambda lab: f"lab{lab.number:02d}")
def test_every_labs_stated_time_is_within_the_band_of_the_model(lab):
    e = pace.estimate_lab(lab.number)
    band = pace.rates().band
    assert abs(lab.minutes / e.minutes - 1) <= band, (
        f"{lab.file} states {lab.minutes} min, the pacing model {e.minutes:.0f} min "
        f"(band +-{band:.0%}): check docs/pacing.md and adjust the syllabus and the notebook"
    )
    # every check cell of the notebook is counted, as one of the kinds
    nb = nbformat.read(pace.LABS / lab.file, as_version=4)
    assert sum(e.kinds.values()) == sum(
        1 for c in nb.cells if c.cell_type == "code" for _ in pace._CHECK.finditer(c.source)
    )
    assert sum(e.kinds.values()) >= 4 and e.run_seconds > 0


def test_lab05_has_four_kernels_and_a_prediction():
    assert pace.estimate_lab(5).kinds == {"predict": 1, "kernel": 4}


def test_the_puzzle_lab_has_ten_puzzles_and_a_prediction():
    assert pace.estimate_lab(4).kinds == {"puzzle": 10, "predict": 1}
    # a puzzle's expected minutes: a first attempt and, for two learners in three, a retry
    assert pace.rates().exercise["puzzle"] == pytest.approx(7.0 + 0.67 * 4.0)


def test_cli_prints_a_row_per_lab(capsys):
    from trnlab.course.__main__ import main

    assert main(["pace"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in out[1:] if line[:3].strip().isdigit()]
    assert [int(r[0]) for r in rows] == [lab.number for lab in COURSE.labs]
    assert [int(r[1]) for r in rows] == [lab.minutes for lab in COURSE.labs]
    assert "reading" in out[0] and "exercises" in out[0] and "dashboards" in out[0]
