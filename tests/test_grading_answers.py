"""Answers as plain data (trnlab.course.answers): what a run records is what the checker sees.

Data answers round-trip exactly (type included); anything read back is either a value or an
AnswerFormatError. A lab 05 NKI kernel is recorded as its nl/nisa calls and replayed through
trnlab.nki, so the checker's verdict (and the profile behind it) is the real check's, and a
kernel that patches the checks, or writes values behind NKI's back, in its own process gains
nothing once replayed; forged traces are refused with a message. Engine-level kernels
(``kernel(ctx, ...)``) are recorded as their context calls and replayed on a fresh context.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl
from tests.grading_helpers import TILED_KERNEL
from trnlab import core
from trnlab.course import answers as A
from trnlab.exercises import Exercise, lab01, lab04, lab05


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
    (lab05.correct_matmul, lab05.reference_tiled),
    (lab05.fits_sbuf, lab05.reference_streamed),
    (lab05.fast, lab05.reference_blocked),
    (lab05.epilogue, lab05.reference_epilogue),
    *((p, p.kernel) for p in lab04.PUZZLES),
]


@pytest.mark.parametrize(("exercise", "kernel"), REFERENCES, ids=lambda x: getattr(x, "key", ""))
def test_an_nki_kernel_replayed_from_its_calls_gets_the_same_verdict(exercise, kernel):
    recorder = A.KernelRecorder(kernel)
    first = exercise.check(recorder)
    replay = _trip(kernel, recorder)
    assert isinstance(replay, A.KernelReplay)
    again = exercise.check(replay)
    assert first.status == "passed" and first.message.startswith("correct")
    assert (again.status, again.message) == (first.status, first.message)


def test_a_replayed_nki_kernel_has_the_learners_profile():
    recorder = A.KernelRecorder(lab05.reference_blocked)
    mine = lab05.profile(recorder, lab05.FAST_SHAPE)
    replayed = lab05.profile(_trip(lab05.reference_blocked, recorder), lab05.FAST_SHAPE)
    assert replayed.latency == mine.latency
    assert replayed.program.counts() == mine.program.counts()
    assert replayed.extra["nki"]["buffers"] == mine.extra["nki"]["buffers"]
    assert replayed.extra["nki"]["instructions"] == mine.extra["nki"]["instructions"]
    lines = {line for _, line in mine.extra["nki"]["lines"]}
    assert {line for _, line in replayed.extra["nki"]["lines"]} == lines
    assert {f for f, _ in replayed.extra["nki"]["lines"]} == {"lab05.py"}


def _one_element(a_t, b):
    """C[0, 0] computed properly; the rest of C never written."""
    M, N = a_t.shape[1], b.shape[1]
    c = nl.ndarray((M, N), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    t = nl.ndarray((1, 1), dtype=a_t.dtype, buffer=nl.sbuf)
    u = nl.ndarray((1, 1), dtype=b.dtype, buffer=nl.sbuf)
    acc = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.psum)
    out = nl.ndarray((1, 1), dtype=c.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a_t[0:1, 0:1])
    nisa.dma_copy(dst=u, src=b[0:1, 0:1])
    nisa.nc_matmul(dst=acc, stationary=t, moving=u)
    nisa.tensor_copy(dst=out, src=acc)
    nisa.dma_copy(dst=c[0:1, 0:1], src=out)
    return c


def test_a_kernel_that_patches_the_checks_passes_only_in_its_own_process():
    real = lab05._compare, lab05._nan_problem

    @nki.jit
    def cheat(a_t, b):
        lab05._compare = lambda *args, **kw: None  # every comparison "matches"
        lab05._nan_problem = lambda *args, **kw: None
        return _one_element(a_t, b)

    try:
        recorder = A.KernelRecorder(cheat)
        assert lab05.correct_matmul.check(recorder).status == "passed"
    finally:
        lab05._compare, lab05._nan_problem = real  # the clean checker: none of the student's run
    replayed = lab05.correct_matmul.check(_trip(cheat, recorder))
    assert replayed.status == "failed" and "C[0, 1] was never stored" in replayed.message


def test_values_written_behind_nkis_back_do_not_survive_the_trip():
    @nki.jit
    def behind_the_back(a_t, b):
        c = _one_element(a_t, b)
        if a_t._s.data is not None:  # the right answer, written straight into HBM's array
            c._s.data[...] = a_t._s.data.T @ b._s.data
        return c

    # in its own process the trick works: C holds the right values when the check reads it
    recorder = A.KernelRecorder(behind_the_back)
    assert lab05.correct_matmul.check(recorder).status == "passed"
    replayed = lab05.correct_matmul.check(_trip(behind_the_back, recorder))
    assert replayed.status == "failed" and "was never stored" in replayed.message


@nki.jit
def _overwrites(a_t, b):
    space: dict = {"nki": nki, "nl": nl, "nisa": nisa}
    exec(TILED_KERNEL.replace("accumulate=k0 > 0", "accumulate=False"), space)
    return space["my_tiled"](a_t, b)


def test_errors_and_wrong_kernels_read_the_same_when_replayed():
    @nki.jit
    def too_big(a_t, b):
        nl.ndarray((256, 8), dtype=nl.bfloat16, buffer=nl.sbuf)

    @nki.jit
    def own_bug(a_t, b):
        return [][0]

    @nki.jit
    def caught(a_t, b):
        try:
            nl.ndarray((256, 8), dtype=nl.bfloat16, buffer=nl.sbuf)
        except core.HardwareRuleError:
            pass
        return _one_element(a_t, b)

    for kernel in (_overwrites, too_big, own_bug, caught):
        recorder = A.KernelRecorder(kernel)
        first = lab05.correct_matmul.check(recorder)
        again = lab05.correct_matmul.check(_trip(kernel, recorder))
        assert first.status == again.status == "failed"
        assert again.message == first.message
    assert "only the last K tile" in lab05.correct_matmul.check(_overwrites).message
    recorder = A.KernelRecorder(own_bug)
    lab05.correct_matmul.check(recorder)
    again = lab05.correct_matmul.check(_trip(own_bug, recorder))
    assert "your kernel raised IndexError: list index out of range" in again.message


def _recorded(kernel, exercise=lab05.correct_matmul) -> dict:
    recorder = A.KernelRecorder(kernel)
    exercise.check(recorder)
    return json.loads(json.dumps(A.encode(kernel, recorder)))


def _forged(calls, end=None) -> A.KernelReplay:
    data = _recorded(_one_element)
    for t in data["traces"]:
        t["calls"], t["end"] = calls, end
    return A.decode(data)


def _t(h, shape=(1, 1), strides=(1, 1), off=0) -> dict:
    return {"$": "t", "h": h, "shape": list(shape), "strides": list(strides), "off": off}


SITE = [0, 10, 1, 20, "tile", "kernel", "<cell>"]
SBUF = {"$": "mem", "name": "sbuf"}


@pytest.mark.parametrize(
    ("calls", "says"),
    [
        ([["nl._secret", [], {}, None, False, SITE]], "nl._secret is not part of the NKI API"),
        ([["os.system", ["ls"], {}, None, False, SITE]], "os.system is not part of the NKI API"),
        ([["nisa.dma_copy", [], {"dst": _t(7), "src": _t(0)}, None, False, SITE]], "never made"),
        (
            [
                [
                    "nisa.dma_copy",
                    [],
                    {"dst": _t(0, (1, 1), (1, 1), 10**9), "src": _t(1)},
                    None,
                    False,
                    SITE,
                ]
            ],
            "outside it",
        ),
        (
            [
                [
                    "nl.ndarray",
                    [[128, 1], "float32", SBUF],
                    {},
                    {**_t(5, (128, 1), (1, 1)), "new": True},
                    False,
                    SITE,
                ]
            ],
            "tensor numbering",
        ),
        (
            [["nisa.memset", [], {"dst": {"$": "foreign", "type": "Storage"}}, None, False, SITE]],
            "did not get from NKI",
        ),
        ([["nl.ndarray", [[128, 1], "float32"], {"colour": 1}, None, False, SITE]], "malformed"),
        (
            [["nl.ndarray", [[999, 1], "float32", SBUF], {}, None, False, SITE]],
            "raised TileTooLargeError when replayed but not when your kernel ran",
        ),
        (
            [["nl.ndarray", [[128, 1], "float32", SBUF], {}, None, True, SITE]],
            "raised when your kernel ran but not when replayed",
        ),
        ([["nl.ndarray", [[128, 1], "float32", SBUF], {}, None, False, ["x"]]], "source location"),
        (
            [
                [
                    "nl.ndarray",
                    [[128, 1], "float32", {"$": "mem", "name": "dram"}],
                    {},
                    None,
                    False,
                    SITE,
                ]
            ],
            "memory 'dram'",
        ),
        (
            [["nisa.activation", [], {"op": {"$": "op", "name": "_assign"}}, None, False, SITE]],
            "operator",
        ),
        (["nonsense"], "malformed"),
    ],
)
def test_forged_nki_traces_fail_the_check_with_a_message(calls, says):
    result = lab05.correct_matmul.check(_forged(calls))
    assert result.status == "failed" and says in result.message, result.message


def test_a_kernel_run_on_arguments_it_was_never_recorded_on_is_refused():
    recorder = A.KernelRecorder(lab05.reference_epilogue)
    replay = _trip(lab05.reference_epilogue, recorder)  # recorded nothing: never called
    result = lab05.epilogue.check(replay)
    assert result.status == "failed" and "no record of your kernel" in result.message


# --- any forged trace: refused with a message, never a crash of the checker ----------------------
_BASE = None


def _base() -> dict:
    global _BASE
    if _BASE is None:
        _BASE = _recorded(_one_element)
    return _BASE


_ARGS = [nki.hbm((300, 200), nl.bfloat16, "a_t"), nki.hbm((300, 700), nl.bfloat16, "b")]
junk = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**40), 2**40),
        st.sampled_from([0, 1, 2, 3, 128, 512, -1]),
        st.sampled_from(["nl.ndarray", "nisa.dma_copy", "nisa.nc_matmul", "float32", "t", "$"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.fixed_dictionaries(
            {"$": st.sampled_from(["t", "mem", "enum", "op", "ufunc", "dtype", "tuple", "x"])},
            optional={
                "h": inner,
                "shape": inner,
                "strides": inner,
                "off": inner,
                "name": inner,
                "cls": inner,
                "items": inner,
                "new": inner,
            },
        ),
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_any_forged_nki_trace_is_refused_with_a_message_never_a_crash(data):
    trace_data = json.loads(json.dumps(_base()))
    trace = next(t for t in trace_data["traces"] if '"numerics": true' in t["key"]
                 and "[300, 200]" in t["key"])  # fmt: skip
    calls = trace["calls"]
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(calls) - 1))
        call = calls[i]
        field = data.draw(st.integers(0, len(call)))
        if field == len(call):  # drop or repeat a call
            if data.draw(st.booleans()):
                calls.pop(i)
            else:
                calls.insert(i, json.loads(json.dumps(call)))
            if not calls:
                break
            continue
        if field in (1, 2) and call[field]:  # an operand of the call
            keys = list(range(len(call[1]))) if field == 1 else list(call[2])
            k = data.draw(st.sampled_from(keys))
            call[field][k] = data.draw(junk)
        else:
            call[field] = data.draw(junk)
    try:
        replay = A.decode(trace_data)
    except A.AnswerFormatError:
        return
    try:
        nki.profile(replay, chip="trn1")(*_ARGS)
    except (A.GraderReplayError, A.AnswerFormatError, core.HardwareRuleError,
            core.KernelArgumentError, nki.NotModelledError):  # fmt: skip
        pass


# --- engine-level kernels: their context calls, replayed on a context ----------------------------
def _ctx_kernel(ctx, x, y):
    t = ctx.sbuf(x.shape, x.fmt, "t")
    ctx.load(t, x)
    ctx.activation(t, t, "relu", scale=2.0)
    ctx.store(y, t)


def _ctx_args():
    x = np.linspace(-1, 1, 128 * 64, dtype=np.float32).reshape(128, 64)
    return {"x": core.hbm(x, "bf16"), "y": core.hbm((128, 64), "bf16")}


def test_an_engine_level_kernel_replays_on_a_fresh_context():
    recorder = A.KernelRecorder(_ctx_kernel)
    mine = core.run(recorder, chip="trn1", **_ctx_args())
    replayed = core.run(_trip(_ctx_kernel, recorder), chip="trn1", **_ctx_args())
    assert np.array_equal(replayed.outputs["y"], mine.outputs["y"])
    assert replayed.latency == mine.latency


@pytest.mark.parametrize(
    ("calls", "says"),
    [
        ([["_record", [], {}, None, False]], "ctx._record is not part of the kernel API"),
        ([["store", [{"$": "view", "h": 7, "r": [0, 1, 0, 1]}], {}, None, False]], "never made"),
        ([["sbuf", [[128, 1], "fp32"], {}, 9, False]], "handle numbering"),
        ([["free", [{"$": "foreign", "type": "Tile"}], {}, None, False]], "did not get from"),
        ([["sbuf", [[128, 1], "fp32"], {}, None, True]], "raised when your kernel ran"),
        (["nonsense"], "malformed"),
    ],
)
def test_forged_context_traces_are_refused(calls, says):
    recorder = A.KernelRecorder(_ctx_kernel)
    core.run(recorder, chip="trn1", **_ctx_args())
    data = json.loads(json.dumps(A.encode(_ctx_kernel, recorder)))
    for t in data["traces"]:
        t["calls"] = calls
    with pytest.raises(A.GraderReplayError, match=says):
        core.run(A.decode(data), chip="trn1", **_ctx_args())
