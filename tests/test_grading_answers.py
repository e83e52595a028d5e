"""Answers as plain data (trnlab.course.answers): what a run records is what the checker sees.

Data answers round-trip exactly (type included); anything read back is either a value or an
AnswerFormatError; a lab 04 kernel is recorded as its context calls and replayed on a fresh
context, so the checker's verdict is the real check's, and a kernel that patches the checks
in its own process gains nothing once replayed.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.grading_helpers import TILED_KERNEL
from trnlab.course import answers as A
from trnlab.exercises import Exercise, lab01, lab04


def _trip(x, recorder=None):
    return A.decode(json.loads(json.dumps(A.encode(x, recorder))))


def _same(a, b) -> bool:
    """Equal values of the same types, NaN equal to NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
    if isinstance(a, float | np.floating):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


numpy_scalars = st.one_of(
    st.integers(-(2**31), 2**31 - 1).map(np.int32),
    st.integers(0, 2**63 - 1).map(np.uint64),
    st.floats(width=32).map(np.float32),
    st.floats().map(np.float64),
    st.booleans().map(np.bool_),
)
arrays = st.builds(
    lambda v, dt: np.array(v, dtype=dt),
    st.lists(st.floats(width=16), max_size=12),
    st.sampled_from(["float32", "float64", "float16"]),
)
leaves = st.one_of(
    st.none(),
    st.just(Ellipsis),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=50),
    numpy_scalars,
    arrays,
)
keys = st.one_of(st.text(max_size=10), st.integers(), st.booleans())
data = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.lists(inner, max_size=5).map(tuple),
        st.dictionaries(keys, inner, max_size=5),
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(data)
def test_data_answers_round_trip_with_their_types(answer):
    assert _same(_trip(answer), answer)


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(
                ["$", "items", "value", "dtype", "shape", "data", "type", "traces", "h", "r"]
            )
            | st.text(max_size=4),
            inner,
            max_size=4,
        ),
        st.fixed_dictionaries(
            {
                "$": st.sampled_from(
                    [
                        "tuple",
                        "dict",
                        "numpy",
                        "ndarray",
                        "float",
                        "kernel",
                        "opaque",
                        "ellipsis",
                        "view",
                        "nonsense",
                    ]
                )
            },
            optional={
                "items": inner,
                "value": inner,
                "dtype": inner,
                "shape": inner,
                "data": inner,
                "type": inner,
                "traces": inner,
            },
        ),
    ),
    max_leaves=20,
)


@settings(max_examples=500, deadline=None)
@given(json_values)
def test_any_captured_data_decodes_or_is_refused_never_crashes(value):
    try:
        A.decode(value)
    except A.AnswerFormatError:
        pass


def test_objects_the_grader_cannot_carry_fail_saying_why():
    class Sneaky(float):
        def __eq__(self, other):
            return True

    opaque = _trip(object())
    assert isinstance(opaque, A.Opaque) and "your answer is a object" in opaque.message()
    # a float subclass travels as the float it is, so its __eq__ cannot help it
    assert type(_trip(Sneaky(1.0))) is float
    too_deep = []
    for _ in range(A.MAX_DEPTH + 5):
        too_deep = [too_deep]
    assert isinstance(_trip(too_deep), A.Opaque)


def test_captured_answers_latest_wins_and_the_hook_marks_itself(tmp_path, monkeypatch):
    monkeypatch.setattr(Exercise, "check", Exercise.check)  # restored after the test
    path = tmp_path / "answers.jsonl"
    A.install_capture(path)
    assert lab01.growth.check(8.0).status == "failed"
    assert lab01.growth.check(np.float32(2517 / 190)).status == "passed"
    assert lab01.trust.check(None).status == "not attempted"
    found, installed = A.read_captured(path.read_text())
    assert installed
    assert set(found) == {"lab01.growth", "lab01.trust"}
    assert _same(A.decode(found["lab01.growth"]), np.float32(2517 / 190))
    assert A.decode(found["lab01.trust"]) is None
    with pytest.raises(A.AnswerFormatError, match="line 1"):
        A.read_captured('{"key": 3, "answer": 1}\n')
    with pytest.raises(A.AnswerFormatError, match="not JSON"):
        A.read_captured("{oops\n")


REFERENCES = [
    (lab04.correct_matmul, lab04.reference_tiled),
    (lab04.fits_sbuf, lab04.reference_streamed),
    (lab04.fast, lab04.reference_blocked),
    (lab04.epilogue, lab04.reference_epilogue),
]


@pytest.mark.parametrize(("exercise", "kernel"), REFERENCES, ids=lambda x: getattr(x, "key", ""))
def test_a_kernel_replayed_from_its_calls_gets_the_same_verdict(exercise, kernel):
    recorder = A.KernelRecorder(kernel)
    first = exercise.check(recorder)
    replay = _trip(kernel, recorder)
    assert isinstance(replay, A.KernelReplay)
    again = exercise.check(replay)
    assert (first.status, first.message) == ("passed", "correct")
    assert (again.status, again.message) == (first.status, first.message)


def _one_tile_kernel(ctx, a_t, b, c):
    t = ctx.sbuf((1, 1), a_t.fmt, "a")
    u = ctx.sbuf((1, 1), b.fmt, "b")
    acc = ctx.psum((1, 1), "acc")
    out = ctx.sbuf((1, 1), c.fmt, "c")
    ctx.load(t, a_t[0:1, 0:1])
    ctx.load(u, b[0:1, 0:1])
    ctx.matmul(acc, t, u)
    ctx.copy(out, acc)
    ctx.store(c[0:1, 0:1], out)


def test_a_kernel_that_patches_the_checks_passes_only_in_its_own_process(monkeypatch):
    real = lab04._compare

    def cheat(ctx, a_t, b, c):
        lab04._compare = lambda *args, **kw: None  # every comparison "matches"
        _one_tile_kernel(ctx, a_t, b, c)

    try:
        recorder = A.KernelRecorder(cheat)
        assert lab04.correct_matmul.check(recorder).status == "passed"
    finally:
        lab04._compare = real  # the clean checker: nothing of the student's run is in it
    replayed = lab04.correct_matmul.check(_trip(cheat, recorder))
    assert replayed.status == "failed" and "values are wrong" in replayed.message


def test_errors_and_wrong_kernels_read_the_same_when_replayed():
    space: dict = {}
    exec(TILED_KERNEL.replace("accumulate=k0 > 0", "accumulate=False"), space)
    accumulate_never = space["my_tiled"]  # a first tiled kernel that never accumulates over K

    def too_big(ctx, a_t, b, c):
        ctx.sbuf((128, 10**6), "bf16")

    def own_bug(ctx, a_t, b, c):
        return [][0]

    def caught(ctx, a_t, b, c):
        try:
            ctx.sbuf((128, 10**6), "bf16")
        except Exception:
            pass
        _one_tile_kernel(ctx, a_t, b, c)

    for kernel in (accumulate_never, too_big, own_bug, caught):
        recorder = A.KernelRecorder(kernel)
        first = lab04.correct_matmul.check(recorder)
        again = lab04.correct_matmul.check(_trip(kernel, recorder))
        assert first.status == again.status == "failed"
        assert again.message == first.message
        if kernel is own_bug:
            assert "your kernel raised IndexError: list index out of range" in again.message


def _forged(calls, end=None):
    recorder = A.KernelRecorder(lambda ctx, a_t, b, c: None)
    lab04.epilogue.check(recorder)  # any key: the replay looks up the epilogue's
    data = A.encode(lambda: None, recorder)
    for t in data["traces"]:
        t["calls"], t["end"] = calls, end
    return A.decode(json.loads(json.dumps(data)))


@pytest.mark.parametrize(
    ("calls", "says"),
    [
        ([["_record", [], {}, None, False]], "ctx._record is not part of the kernel API"),
        ([["store", [{"$": "view", "h": 7, "r": [0, 1, 0, 1]}], {}, None, False]], "never made"),
        (
            [
                [
                    "store",
                    [{"$": "hview", "h": 3, "r": [5, 2, 0, 1]}, {"$": "ref", "h": 0}],
                    {},
                    None,
                    False,
                ]
            ],
            "IndexError",
        ),
        ([["sbuf", [[128, 1], "fp32"], {}, 9, False]], "handle numbering"),
        ([["free", [{"$": "foreign", "type": "Tile"}], {}, None, False]], "did not get from"),
        ([["sbuf", [[128, 1], "fp32"], {}, None, True]], "raised when your kernel ran"),
        (["nonsense"], "malformed"),
    ],
)
def test_forged_traces_fail_the_check_with_a_message(calls, says):
    result = lab04.epilogue.check(_forged(calls))
    assert result.status == "failed" and says in result.message


def test_a_kernel_run_on_arguments_it_was_never_recorded_on_is_refused():
    recorder = A.KernelRecorder(lab04.reference_epilogue)
    replay = _trip(lab04.reference_epilogue, recorder)  # recorded nothing: never called
    result = lab04.epilogue.check(replay)
    assert result.status == "failed" and "no record of your kernel" in result.message
