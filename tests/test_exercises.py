"""The exercise framework: checks, slips, unit strings, predictions, strict and solutions modes,
and the published results bundle."""

from __future__ import annotations

import doctest
import math
import re

import nbformat
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trnlab import exercises as exs
from trnlab.exercises import (
    Exercise,
    ExerciseFailed,
    Prediction,
    Slip,
    _checks,
    _predict,
    _slips,
    _units,
    choice,
    close_to,
    how_far,
    slips,
)


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
        check
        or close_to(
            2.5444,
            what="the clock",
            unit="GHz",
            slips=(*slips.si_prefixes("GHz", hi=9), *slips.mac_flops(2.0)),
        ),
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


@pytest.mark.parametrize("answer", [2.5444, 2.54, 2.545, "2.54 GHz", "2544 MHz", "2.54e9 Hz"])
def test_right_answer_passes_rounded_or_with_a_unit(answer):
    r = make().check(answer)
    assert r.status == exs.PASSED and bool(r), r
    assert "PASSED" in r._repr_html_() and "PASSED" in repr(r)


def test_the_notebook_shows_the_marks_the_labs_name():
    # lab 00 teaches PASSED, NOT YET and NOT ATTEMPTED: the rendered line must say the same
    ex = make()
    for answer, mark in ((2.54, "PASSED"), (9.9, "NOT YET"), (None, "NOT ATTEMPTED")):
        r = ex.check(answer)
        assert r.mark == mark
        assert f"{mark}</b>" in r._repr_html_() and repr(r).startswith(f"[{mark}]")


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (2.5444e9, "it looks like Hz; the question asks for GHz"),
        (2544.4, "it looks like MHz"),
        (2 * 2.5444, "a multiply-accumulate is 2 FLOPs"),
        (3.0, "about 18% too high"),
        (2.0, "about 21% too low"),
        (25.4, "about 10x too high"),
        (2.53, "slightly too low, by 0.6%"),
        (-2.5444, "has the wrong sign"),
        ("fast", "'fast' does not start with a number"),
        ("E0", "'E0' does not start with a number"),  # an exponent alone (hypothesis found it)
        ("-e5 GHz", "does not start with a number"),
        ("1 x 10^99999 GHz", "the answer is a finite number"),
        ("2.5 TB/s", "is a bandwidth (bytes per second), but the question asks for a clock"),
        ([2.5], "should be a number (in GHz), not a list"),
        (float("nan"), "finite"),
    ],
)
def test_wrong_answers_name_the_slip_or_say_how_far(answer, says):
    r = make().check(answer)
    assert r.status == exs.FAILED
    assert says in r.message, r.message


def test_tolerance_accepts_three_significant_figures_and_no_more_slack():
    check = close_to(20.784, unit="PFLOP/s")
    assert check(20.8) is None and check(20.78) is None and check(20.834) is None
    assert check(20.7) is not None and check(20.9) is not None
    assert close_to(3 / 19)(0.158) is None and close_to(3 / 19)(0.16) is not None
    # a question that asks for more figures gets them
    assert close_to(1024.0, sig=4)(1025) is not None and close_to(1024.0)(1025) is None
    # a declared relative tolerance widens it (estimates)
    assert close_to(2048.0, rtol=0.03)(2100) is None


def test_a_slip_on_top_of_another_is_named_as_two():
    check = close_to(
        20.784, unit="PFLOP/s", slips=(*slips.si_prefixes("PFLOP/s"), Slip(1 / 16, "one chip"))
    )
    msg = check(20.784e3 / 16)
    assert "two slips at once: one chip; and it looks like TFLOP/s" in msg


def test_known_wrong_answers_are_told_what_they_are():
    check = close_to(0.25, known={-2.0: "that is the exponent"})
    assert check(-2) == "your answer is not -2: that is the exponent"


def test_strict_mode_raises_on_failure_only():
    exs.configure(strict=True)
    ex = make()
    with pytest.raises(ExerciseFailed, match="too high"):
        ex.check(3.0)
    assert ex.check(2.5444).status == exs.PASSED


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
    assert ex.unit == "GHz" and ex.numeric


def test_a_check_that_breaks_on_odd_input_reports_instead_of_crashing():
    ex = make(check=lambda a: None if a["x"] == 1 else "no")
    r = ex.check(5)
    assert r.status == exs.FAILED and "could not read your answer" in r.message


def test_choice_explains_wrong_options():
    check = choice("docs", ["docs", "glossary"], explain={"glossary": "it has known errors"})
    assert check("Docs") is None and check(" 'docs' ") is None
    assert check("glossary") == "it has known errors"
    assert "pick one of 'docs', 'glossary'" in check("wiki")


@pytest.mark.parametrize(
    ("text", "unit", "value"),
    [
        ("20.8 PF", "PFLOP/s", 20.8),
        ("20,784 TFLOP/s", "PFLOP/s", 20.784),
        ("1.5 TB/s", "GB/s", 1500.0),
        ("96 GiB", "GiB", 96.0),
        ("96 GiB", "B", 96 * 2**30),
        ("16%", "", 0.16),
        ("1/4", "", 0.25),
        ("13.2x", "x", 13.2),
        ("0.183 us", "ns", 183.0),
        ("44 tiles", "tiles", 44.0),
        ("about 2.5e3 W", "kW", 2.5),
        ("3 x 10^6", "B", 3e6),
        ("268 MFLOPs", "FLOP", 268e6),
        ("5.2 pflops", "PFLOP/s", 5.2),
    ],
)
def test_natural_unit_strings_are_read_into_the_question_unit(text, unit, value):
    assert _units.to_unit(text, unit) == pytest.approx(value)


@pytest.mark.parametrize(
    ("text", "unit", "says"),
    [
        ("96 GiB", "GB/s", "is an amount of memory (bytes), but the question asks for a bandwidth"),
        ("96 Gb", "GiB", "a lower-case b is a bit"),
        ("20 gb", "GB", "'gb' could be GB (amount of memory) or Gb (amount in bits)"),
        ("2 GHz", "ns", "is a clock frequency, but the question asks for a time"),
        ("12 Gbs", "GB/s", "'Gbs' is not a unit this check knows"),
    ],
)
def test_a_unit_of_another_kind_gets_a_teaching_message(text, unit, says):
    with pytest.raises(_units.UnitMismatch, match=re.escape(says)):
        _units.to_unit(text, unit)


@given(st.floats(min_value=1e-30, max_value=1e30, allow_nan=False, allow_infinity=False))
def test_how_far_never_says_zero_percent_or_a_huge_percentage(ratio):
    if ratio == 1.0:
        return
    words = how_far(ratio)
    assert ("too high" in words) == (ratio > 1)
    for pct in re.findall(r"(\d[\d,]*(?:\.\d+)?)%", words):
        v = float(pct.replace(",", ""))
        assert 0 < v < 10_000, words
    assert not re.search(r"\d{7,}", words.replace(",", "")), words  # no 17-digit numbers


@given(
    expected=st.floats(min_value=1e-6, max_value=1e15),
    sig=st.integers(min_value=3, max_value=6),
)
def test_the_answer_rounded_to_the_asked_figures_always_passes(expected, sig):
    rounded = float(f"{expected:.{sig}g}")
    assert close_to(expected, sig=sig)(rounded) is None


@given(st.floats(min_value=1e-3, max_value=1e6))
def test_a_unit_string_of_the_same_kind_is_converted_exactly(value):
    assert _units.to_unit(f"{value!r} TB/s", "GB/s") == pytest.approx(value * 1e3)
    assert _units.to_unit(f"{value!r} GiB", "MiB") == pytest.approx(value * 1024)


def test_slip_factories_point_both_ways_and_name_the_unit():
    si = slips.si_prefixes("PFLOP/s")
    assert {s.ratio for s in si} == {10.0**e for e in (3, 6, 9, 12, 15, -3, -6, -9, -12, -15)}
    assert any("it looks like FLOP/s" in s.says for s in si if s.ratio == 1e15)
    b = slips.binary_prefixes("GiB")
    assert any(math.isclose(s.ratio, 1e9 / 2**30) for s in b)
    assert any("it looks like MiB" in s.says for s in b if s.ratio == 1024)
    assert slips.chip_vs_core(8)[0].ratio == 1 / 8 and slips.chip_vs_core(8, "core")[0].ratio == 8
    assert slips.fraction_vs_percent()[0].ratio == 100
    assert slips.fraction_vs_percent("percent")[0].ratio == 0.01
    assert slips.per_direction()[0].ratio == 2 and slips.per_direction("both")[0].ratio == 0.5


def test_a_prediction_compares_explains_and_never_fails_on_the_models_side():
    calls = []

    def model():
        calls.append(1)
        return 25.0

    p = Prediction(
        "t.latency",
        "Predict the latency.",
        model,
        what="the latency",
        unit="us",
        explain=lambda pred, m: (
            "each matmul waits for its load" + (" (you counted compute only)" if pred < 5 else "")
        ),
        within=0.3,
        slips=slips.si_prefixes("us", hi=6),
    )
    good = p.check(22)
    assert good.status == exs.PASSED
    assert good.message.startswith("a good prediction: you said 22.0 us, the model gives 25.0 us")
    assert "Why: each matmul waits for its load" in good.message
    low = p.check(2.9)
    assert low.status == exs.FAILED and "about 8.6x too low" in low.message
    assert "(you counted compute only)" in low.message
    # a unit slip is pointed out without giving the model's figure away
    slip = p.check(0.025)
    assert "it looks like ms" in slip.message and "25.0" not in slip.message
    # ... also when the prediction, read in the right unit, is good but not exact (30 us -> 0.030)
    near = p.check(0.030)
    assert near.status == exs.FAILED and "it looks like ms" in near.message
    # ... but not when it is out by more than the prediction's own tolerance (0.3)
    assert "it looks like ms" not in p.check(0.040).message
    assert p.check(-3).status == exs.FAILED and "cannot be" in p.check(-3).message
    assert p.check(None).status == exs.NOT_ATTEMPTED
    assert p.reference() == 25.0 and p.unit == "us"


def test_a_good_prediction_passes_even_where_a_small_unit_slip_would_fit():
    """GB for GiB is a 7% slip; a prediction 7% off is a good prediction, not a slip."""
    p = Prediction(
        "t.memory", "Predict the memory.", lambda: 100.0, what="the memory", unit="GiB",
        explain=lambda pred, m: "state plus activations", within=0.25,
        slips=slips.binary_prefixes("GiB"),
    )  # fmt: skip
    assert p.check(100 * 2**30 / 1e9).status == exs.PASSED
    assert p.check(100 * 1024).status == exs.FAILED


def test_published_results_are_hidden_in_the_learner_edition_and_round_trip():
    ex = make()
    ex.check(2.5444)
    bundle = exs.publish("lab-test", clock_ghz=2.5444)
    assert bundle["exercises"]["t.clock"] == "passed"
    assert bundle["messages"]["t.clock"] == "correct"
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={exs.MIME_TYPE: bundle, "text/plain": ""})
    ]
    nb.cells.append(cell)
    assert exs.read_published(nb)["values"]["clock_ghz"] == 2.5444
    with pytest.raises(LookupError, match="published no trnlab results"):
        exs.read_published(nbformat.v4.new_notebook())


def test_publish_displays_no_readable_text_unless_solutions_are_on(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, raw=False: shown.append(obj))
    exs.publish("lab-test", answer=42)
    assert shown[-1]["text/plain"] == "" and shown[-1][exs.MIME_TYPE]["values"] == {"answer": 42}
    exs.configure(solutions=True)
    exs.publish("lab-test", answer=42)
    assert "answer: 42" in shown[-1]["text/plain"]


@pytest.mark.parametrize("module", [exs, _checks, _slips, _units, _predict])
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
