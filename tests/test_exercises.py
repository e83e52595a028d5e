"""Exercise checks: pass, specific hints, not attempted, strict and solutions modes."""

from __future__ import annotations

import nbformat
import pytest

from trnlab import exercises as exs
from trnlab.exercises import Exercise, ExerciseFailed, choice, close_to


@pytest.fixture(autouse=True)
def _default_settings():
    before = exs.settings()
    exs.configure(strict=False, solutions=False)
    yield
    exs.configure(**before)


def make(check=None):
    return Exercise(
        "t.clock",
        "Derive the clock in GHz",
        check or close_to(2.545, rtol=0.005, what="the clock"),
        hints=["divide the peak by the PE count", "remember 2 FLOP per MAC"],
        solution=lambda: 667e12 / (8 * 128 * 128 * 2) / 1e9,
        solution_text="clock = peak / (cores * 128 * 128 * 2)",
    )


def test_untouched_answer_is_not_attempted_and_never_raises():
    exs.configure(strict=True)
    ex = make()
    assert ex.check(None).status == exs.NOT_ATTEMPTED
    assert ex.check(...).status == exs.NOT_ATTEMPTED
    assert not ex.check(None)


def test_right_answer_passes():
    r = make().check(2.5444)
    assert r.status == exs.PASSED and bool(r)
    assert "passed" in r._repr_html_()


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (2.545e9, "10^9"),
        (2 * 2.545, "2 FLOPs"),
        (2.545 / 8, "one core versus eight"),
        (3.0, "18% too high"),
        (2.0, "21% too low"),
        ("fast", "should be a number"),
        (float("nan"), "finite"),
    ],
)
def test_wrong_answers_get_specific_hints(answer, says):
    r = make().check(answer)
    assert r.status == exs.FAILED
    assert says in r.message


def test_strict_mode_raises_on_failure_only():
    exs.configure(strict=True)
    ex = make()
    with pytest.raises(ExerciseFailed, match="too high"):
        ex.check(3.0)
    assert ex.check(2.545).status == exs.PASSED


def test_solutions_mode_checks_the_reference_answer():
    exs.configure(solutions=True, strict=True)
    assert make().check(None).status == exs.PASSED
    broken = Exercise("t.bad", "?", close_to(1.0), solution=lambda: 2.0)
    with pytest.raises(ExerciseFailed):
        broken.check(None)


def test_hints_are_revealed_in_turn_then_solution():
    ex = make()
    assert ex.hint().startswith("Hint 1 of 2: divide")
    second = ex.hint()
    assert second.startswith("Hint 2 of 2") and "solution()" in second
    assert "Reference answer: 2.544" in ex.solution()
    assert ex.reference() == pytest.approx(2.5444, abs=1e-4)


def test_a_check_that_breaks_on_odd_input_reports_instead_of_crashing():
    ex = make(check=lambda a: None if a["x"] == 1 else "no")
    r = ex.check(5)
    assert r.status == exs.FAILED and "could not read your answer" in r.message


def test_choice_explains_wrong_options():
    check = choice("docs", ["docs", "glossary"], explain={"glossary": "it has known errors"})
    assert check("Docs") is None
    assert check("glossary") == "it has known errors"
    assert "pick one of" in check("wiki")


def test_published_results_round_trip_through_a_notebook():
    ex = make()
    ex.check(2.545)
    bundle = exs.publish("lab-test", clock_ghz=2.545)
    assert bundle["exercises"]["t.clock"] == "passed"
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={exs.MIME_TYPE: bundle, "text/plain": "x"})
    ]
    nb.cells.append(cell)
    assert exs.read_published(nb)["values"]["clock_ghz"] == 2.545
    with pytest.raises(LookupError, match="published no trnlab results"):
        exs.read_published(nbformat.v4.new_notebook())
