"""Feedback of every exercise of the labs: its right answer passes (and rounded to three
significant figures, or as a natural unit string), an untouched answer is "not attempted", and
plausible wrong answers get the diagnosis of the slip that produced them. Over all exercises, no
message says 0% or a percentage of 10,000% or more (hypothesis).

Lab 04's puzzles and lab 05's kernel exercises are checked by running them
(tests/test_lab_puzzles.py and tests/test_kernel_profile_lab05.py, which also hold their wrong
kernels); lab 05's one numeric exercise, the predict-then-run latency, is in the
hypothesis test here too.
"""

from __future__ import annotations

import importlib
import math
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from trnlab import exercises as exs
from trnlab.exercises import Exercise

LABS = ["lab00", "lab01", "lab02", "lab03", "lab06", "lab07", "lab08", "lab09", "lab10"]


@pytest.fixture(autouse=True)
def _lenient():
    before = exs.settings()
    exs.configure(strict=False, solutions=False)
    yield
    exs.configure(**before)


def _module(lab):
    return importlib.import_module(f"trnlab.exercises.{lab}")


def _exercises(lab) -> dict[str, Exercise]:
    mod = _module(lab)
    if hasattr(mod, "setup"):
        mod.setup()
    return {v.key: v for v in vars(mod).values() if isinstance(v, Exercise)}


def _all() -> dict[str, Exercise]:
    found = {}
    for lab in LABS:
        found.update(_exercises(lab))
    return found


# Wrong answers a learner plausibly gives, as functions of the reference answer r, with a piece
# of the diagnosis they must get. Every exercise is listed (test below), each with at least two.
WRONG = {
    "lab00.bf16_growth": [
        (lambda r: 13.0, "the new silicon went into 8-bit formats"),
        (lambda r: 2.0, "More cores per chip did most of it"),
    ],
    "lab00.instance_peak": [
        (lambda r: r * 1e3, "it looks like TFLOP/s"),
        (lambda r: r / 16, "that is one chip's peak"),
        (lambda r: r * 4, "that is the sparse figure"),
    ],
    "lab00.cores": [
        (lambda r: 16, "that is the instance's chips"),
        (lambda r: 8, "that is one chip's NeuronCores"),
        (lambda r: 64, "LNC=2 groups two physical NeuronCores"),
    ],
    "lab00.hbm": [
        (lambda r: r * 2**30 / 1e9, "that mixes GiB (2^30 bytes) and GB"),
        (lambda r: 96, "that is Trainium2's HBM"),
        (lambda r: r * 1024, "it looks like MiB"),
    ],
    "lab00.which_lab": [
        (lambda r: 3, "lab 03 is 'The tiled matmul"),
        (lambda r: 12, "there is no lab 12"),
        (lambda r: "MX", "answer with a lab number"),
    ],
    "lab01.clock": [
        (lambda r: r * 1e9, "it looks like Hz"),
        (lambda r: 2 * r, "a multiply-accumulate is 2 FLOPs"),
        (lambda r: 2.4, "documented clock (2.4 GHz)"),
        (lambda r: 8 * r, "divide by its 8 NeuronCores"),
    ],
    "lab01.growth": [
        (lambda r: 3.53, "that is how much BF16 grew"),
        (lambda r: 1 / r, "the ratio the other way round"),
        (lambda r: 6.84, "that stops at Trainium2"),
    ],
    "lab01.bandwidth": [
        (lambda r: 820, "the chip documentation's figure"),
        (lambda r: r * 16, "that is the whole instance"),
        (lambda r: r / 1e3, "it looks like TB/s"),
        (lambda r: r / 2, "divides by the 32 NeuronCores"),
    ],
    "lab01.trust": [
        (lambda r: "glossary", "also gets Trainium2's HBM wrong"),
        (lambda r: "wiki", "pick one of 'docs', 'glossary'"),
    ],
    "lab01.ridge_bf16": [
        (lambda r: 230, "in BF16, memory caught up with compute"),
        (lambda r: 514, "The 8-bit ridge rose instead"),
    ],
    "lab02.sbuf_tiles": [
        (lambda r: 48, "that counts the physical SBUF"),
        (lambda r: 22, "that counts 4 bytes (fp32) per value"),
        (lambda r: 176, "that counts [128 x 512] tiles"),
        (lambda r: r * 128, "a tile spans all 128 partitions"),
    ],
    "lab02.ridge": [
        (lambda r: r / 2, "a multiply-accumulate is 2 FLOPs"),
        (lambda r: r * 2, "that uses the FP8 peak"),
        (lambda r: 78.6e12 / 2.9e12, "divides by the whole chip's HBM bandwidth"),
        (lambda r: r * 1e9, "not the number 368"),
    ],
    "lab02.memory_bound_on": [
        (lambda r: "trn2", "work out trn2's 8-bit ridge (its fp8 peak"),
        (lambda r: "trn1", "on trn1 the kernel is compute-bound"),
    ],
    "lab02.matmul_us": [
        (lambda r: 91, "A figure near the memory bound takes the smaller roof"),
        (lambda r: 1, "No kernel beats the roofline"),
    ],
    "lab02.transpose_us": [
        (lambda r: r * 0.9, "that is a plain copy's time"),
        (lambda r: r * 0.81, "that multiplies by 0.9"),
        (lambda r: r * 2, "that counts 4 bytes (fp32) per value"),
        (lambda r: r / 2, "that counts values, not bytes"),
        (lambda r: r * 1e-6, "in microseconds, not seconds"),
        (lambda r: r / 0.9, "divides by 0.9 twice"),
        (lambda r: r * 368 / 272, "trn1's 272 GB/s"),
        (lambda r: 2.72, "the whole DMA transpose as the model times it"),
        (lambda r: 2.7, "the whole DMA transpose as the model times it"),  # as the chart rounds it
    ],
    "lab03.matmul_ns": [
        (lambda r: 288 / 2.8, "32 cycles in trnlab's model"),
        (lambda r: 741 / 2.8, "until the result is in PSUM"),
        (lambda r: 256 / 2.4, "that uses trn2's 2.4 GHz clock"),
        (lambda r: 512 / 2.8, "a full 512-column moving tile"),
        (lambda r: r / 1e3, "it looks like us"),
    ],
    "lab03.reloads": [
        (lambda r: 1, "with the loads hoisted out of the N loop"),
        (lambda r: 16 * r / 2, "how many A-tile loads the whole kernel makes"),
    ],
    "lab03.tiled_bytes": [
        (lambda r: 2 * r, "that counts 4 bytes (fp32) per value"),
        (lambda r: r / 2, "that counts 1 byte per value"),
        (lambda r: r / 2**20, "it looks like MiB"),
        (lambda r: 2 * (256 * 512 + 512 * 1024 + 256 * 1024), "the minimum"),
    ],
    "lab03.tiled_us": [
        (lambda r: _lab03_matmuls() * 512 / 2.8e3, "but not the loads"),
        (lambda r: _lab03_bytes() / 272e3, "assumes the DMA streams at full"),
        (lambda r: r + 18, "plus the 18 us launch overhead"),
        # each transfer's 0.84 us set-up added to its 160 KiB at 102 GB/s, two per matmul
        (lambda r: _lab03_matmuls() * (2 * 0.84 + 160 * 1024 / 102e3), "set-up added to its"),
    ],
    "lab03.first_compute_bound": [
        (lambda r: "blocked_mn", "fall short of the ridge"),
        (lambda r: "pipelined", "check the ones before it"),
        (lambda r: "tiled", "work out its FLOPs per byte"),
    ],
    "lab06.max_finite": [
        (lambda r: 2.0 ** math.floor(math.log2(r)), "leaves out the mantissa"),
        (lambda r: 2 * r, "the all-ones exponent is kept for Inf and NaN"),
        (lambda r: 2.0**15 * 1.75 * 2**15, "the exponent field is biased"),
    ],
    "lab06.mx_scale": [
        (lambda r: math.log2(r), "that is the exponent"),
        (lambda r: 2 * r, "one step larger"),
        (lambda r: 1 / r, "the inverse of the scale"),
    ],
    "lab06.rne_sum": [
        (lambda r: 2048, "The exact sum is 2048"),
        (lambda r: 3072, "Rounding ties up would add a whole 1"),
    ],
    "lab06.sr_sum": [
        (lambda r: 1024, "no addition is systematically lost"),
        (lambda r: 3072, "each addition adds 0.5 on average"),
    ],
    "lab07.kept": [
        (lambda r: 25, "that looks like a percentage"),
        (lambda r: 0.75, "the fraction pruned away"),
        (lambda r: 4, "that is the speed-up"),
    ],
    "lab07.trn2_sparse": [
        (lambda r: 2.563, "the Trainium2 page's one sparse figure"),
        (lambda r: 4 * 0.667, "that is 4x the BF16 rate"),
        (lambda r: r * 16, "the whole trn2.48xlarge"),
        (lambda r: r * 1e3, "it looks like TFLOP/s"),
    ],
    "lab07.best_pattern": [
        (lambda r: "1:4", "a longer group lets pruning keep"),
        (lambda r: "2:4", "pick one of"),
    ],
    "lab07.prune_error": [
        (lambda r: 75, "counts the weights removed, not their size"),
        (lambda r: 10, "Small weights are not nothing"),
        (lambda r: r / 100, "that looks like a fraction"),
        (lambda r: round(r) / 100, "that looks like a fraction"),  # a rounded fraction: 0.43
    ],
    "lab08.ring_time": [
        (lambda r: r / 2, "a reduce-scatter and then an all-gather"),
        (lambda r: r * 15.3, "not the whole buffer"),
        (lambda r: r / 1e3, "it looks like ms"),
    ],
    "lab08.crossover": [
        (lambda r: r / 16, "multiply by n"),
        (lambda r: r * 15 / 16, "n - 1 cancels"),
        (lambda r: r / 2**20, "it looks like MiB"),
    ],
    "lab08.torus_bisection": [
        (lambda r: 2 * r, "crosses it twice"),
        (lambda r: 4 * r, "nS/4 bytes, not nS"),
        (lambda r: r / 2, "the slowest axis"),
    ],
    "lab08.a2a_limit": [
        (lambda r: "bisection", "a non-blocking switch's cut is half"),
        (lambda r: "latency", "the fixed cost (a few microseconds) is tiny"),
    ],
    "lab09.adam_bytes": [
        (lambda r: 12, "the FP32 optimizer state alone"),
        (lambda r: 18, "keeps the gradients in FP32, as Megatron-LM does"),
        (lambda r: 8, "counts 2 bytes for every copy"),
    ],
    "lab09.min_chips": [
        (lambda r: r - 1, "round up"),
        (lambda r: 13, "reads 96 GiB as 96 x 10^9 bytes"),
        (lambda r: 11.53, "that is the quotient"),
    ],
    "lab09.bubble": [
        (lambda r: 3 / 16, "(p-1)/m, the bubble measured against the ideal"),
        (lambda r: r * 100, "that looks like a percentage"),
        (lambda r: 4 / 20, "that is p/(m+p)"),
    ],
    "lab09.zero3_memory": [
        (lambda r: 16.4, "leaves the activations out"),
        (lambda r: r * 1024, "it looks like MiB"),
    ],
    "lab09.eager_loss_ms": [
        (lambda r: r * 12 / 52, "a fused kernel's 12 bytes per logit"),
        (lambda r: r * 1.643 / 3.35, "the H100's HBM roofline"),
        (lambda r: r / 4, "that is one sequence"),
        (lambda r: r * 48, "the whole global batch"),
        (lambda r: r / 1e3, "it looks like s"),
        (lambda r: 2 * r, "charges the 52 bytes twice"),
    ],
    "lab10.compute_ratio": [
        (lambda r: 4.4, "that is AWS's claim"),
        (lambda r: 1 / r, "the ratio the other way round"),
        (lambda r: 2517 / 1299, "one chip against one chip"),
    ],
    "lab10.implied_power": [
        (lambda r: r / 1e3, "it looks like kW"),
        (lambda r: r / 16, "divides by 4 where it should multiply"),
        (lambda r: r * 667 / 1299, "uses Trainium2's BF16 peak"),
    ],
    "lab10.which_follows": [
        (lambda r: "5x tokens per megawatt", "rests on assumptions"),
        (lambda r: "4x energy efficiency", "pick one of"),
    ],
    "lab10.tokens_per_mw": [
        (lambda r: 5, "needs more than the chips"),
        # the HBM bandwidth ratio alone: forgets the attention walks and the power per chip
        (lambda r: 4.9 / 2.9, "the power per chip"),
        (lambda r: 4.9 / 2.9, "attention over the KV cache"),
    ],
}


def _lab03_matmuls() -> int:
    """Matmuls of the tiled kernel on lab03's current shape, from its loop structure."""
    m, k, n = _module("lab03").SHAPE
    return (m // 128) * (k // 128) * (n // 512)


def _lab03_bytes() -> int:
    """Bytes the tiled kernel moves: A once per N tile, B once per M tile, C once (bf16)."""
    m, k, n = _module("lab03").SHAPE
    return 2 * (m * k * (n // 512) + k * n * (m // 128) + m * n)


def test_every_exercise_has_wrong_answers_to_test():
    keys = set(_all())
    assert keys == set(WRONG), (
        f"missing: {sorted(keys - set(WRONG))}; stale: {sorted(set(WRONG) - keys)}"
    )
    assert all(len(cases) >= 2 for cases in WRONG.values())


@pytest.mark.parametrize("lab", LABS)
def test_every_exercise_answers_to_the_name_its_messages_print(lab):
    # A check prints "lab07.trn2_sparse: ..."; lab07.trn2_sparse.hint() must then work.
    mod = _module(lab)
    for ex in _exercises(lab).values():
        name = ex.key.split(".", 1)[1]
        assert getattr(mod, name, None) is ex, f"{ex.key} is not {lab}.{name}"


def _right_forms(ex: Exercise) -> list:
    """The reference, rounded to the figures the question asks (3 unless it asks more), and
    written with its unit."""
    r = ex.reference()
    if isinstance(r, str):
        return [r, r.upper(), f" '{r}' "]
    forms = [r, float(f"{r:.{ex.sig}g}")]
    if ex.unit and ex.unit not in {"x", "%"}:
        forms.append(f"{r!r} {ex.unit}")
    return forms


@pytest.mark.parametrize("key", sorted(WRONG))
def test_right_answer_passes_rounded_and_with_its_unit(key):
    ex = _all()[key]
    for answer in _right_forms(ex):
        result = ex.check(answer)
        assert result.status == exs.PASSED, (answer, result)


@pytest.mark.parametrize("key", sorted(WRONG))
def test_untouched_answer_is_not_attempted(key):
    ex = _all()[key]
    for answer in (None, ...):
        assert ex.check(answer).status == exs.NOT_ATTEMPTED


@pytest.mark.parametrize("key", sorted(WRONG))
def test_plausible_wrong_answers_get_their_diagnosis(key):
    ex = _all()[key]
    r = ex.reference()
    for make, says in WRONG[key]:
        answer = make(r)
        result = ex.check(answer)
        assert result.status == exs.FAILED, (answer, result)
        assert says in result.message, (answer, result.message)


VARIANTS = (
    [("lab01", {"clock_chip": c}) for c in ("trn1", "trn2", "trn3")]
    + [
        ("lab06", {"max_format": f, "mx_format": x})
        for f, x in zip(
            ["fp8_e5m2", "fp8_e4m3", "fp8_e4m3fn", "fp8_e3m4", "fp16", "bf16"],
            ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "mxfp4"],
            strict=True,
        )
    ]
    + [("lab03", {"m": m, "k": k, "n": n}) for m, k, n in ((128, 256, 1024), (512, 1024, 2048))]
)


@pytest.mark.parametrize(("lab", "values"), VARIANTS, ids=[str(v) for _, v in VARIANTS])
def test_every_variant_passes_its_reference_rounded_and_diagnoses_a_slip(lab, values):
    mod = _module(lab)
    try:
        mod.setup(**values)
        for ex in (v for v in vars(mod).values() if isinstance(v, Exercise)):
            for answer in _right_forms(ex):
                assert ex.check(answer).status == exs.PASSED, (ex.key, answer)
            make, says = WRONG[ex.key][0]
            r = ex.reference()
            if ex.key == "lab03.reloads" and r == 1:
                continue  # no hoisting slip when N is one tile
            assert says in ex.check(make(r)).message, (ex.key, ex.check(make(r)).message)
    finally:
        mod.setup()


_PERCENT = re.compile(r"(?<![\d.,])(\d[\d,]*(?:\.\d+)?)\s*%")


def _assert_reasonable(message: str) -> None:
    for pct in _PERCENT.findall(message):
        value = float(pct.replace(",", ""))
        assert 0 < value < 10_000, message
    # no 17-digit numbers: anything past nine digits is written with an exponent
    assert not re.search(r"\d{10,}", message.replace(",", "")), message


NUMERIC = sorted(
    k
    for k in WRONG
    if k
    not in {
        "lab00.which_lab",
        "lab01.trust",
        "lab02.memory_bound_on",
        "lab03.first_compute_bound",
        "lab07.best_pattern",
        "lab08.a2a_limit",
        "lab10.which_follows",
    }
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    key=st.sampled_from(NUMERIC),
    ratio=st.one_of(
        st.floats(min_value=1e-20, max_value=1e20),
        st.floats(min_value=0.9, max_value=1.1),
        st.sampled_from([1e3, 1e-3, 1e15, 1.074, 2.0, 0.5, 100.0, 1 + 1e-7, 1 - 1e-7]),
    ),
    sign=st.sampled_from([1, 1, 1, -1]),
)
def test_no_message_says_zero_percent_or_a_huge_percentage(key, ratio, sign):
    ex = _all_cached()[key]
    result = ex.check(sign * ratio * ex.reference())
    _assert_reasonable(result.message)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ratio=st.one_of(
        st.floats(min_value=1e-20, max_value=1e20),
        st.floats(min_value=0.5, max_value=2.0),
        st.sampled_from([1.0, 1e3, 1e-3, 1e6, 1e-6, 2.0, 0.5, 1 + 1e-7, 1 - 1e-7, 1.25, 0.75]),
    ),
    sign=st.sampled_from([1, 1, 1, -1]),
)
def test_lab05_prediction_never_says_zero_percent_or_a_huge_percentage(ratio, sign):
    """Lab 05's numeric exercise: its check and the explanation printed after it."""
    from trnlab.exercises import lab05

    answer = sign * ratio * lab05.predict_tiled.reference()
    _assert_reasonable(lab05.predict_tiled.check(answer).message)
    _assert_reasonable(lab05.explain_prediction(answer))


@settings(max_examples=150, deadline=None)
@given(
    key=st.sampled_from(sorted(WRONG)),
    text=st.one_of(
        st.text(max_size=12),
        st.builds(
            lambda v, u: f"{v:g} {u}",
            st.floats(min_value=1e-6, max_value=1e9),
            st.sampled_from(["PF", "TB/s", "GiB", "%", "ms", "GHz", "W", "Gbps", "x", "tiles"]),
        ),
    ),
)
def test_any_string_gets_a_readable_message(key, text):
    result = _all_cached()[key].check(text)
    assert result.status in {exs.PASSED, exs.FAILED, exs.NOT_ATTEMPTED}
    assert "could not read your answer" not in result.message, result.message
    _assert_reasonable(result.message)


_CACHE: dict[str, Exercise] = {}


def _all_cached() -> dict[str, Exercise]:
    if not _CACHE:
        _CACHE.update(_all())
    return _CACHE


@settings(max_examples=100, deadline=None)
@given(
    text=st.one_of(
        st.text(max_size=12),
        st.builds(
            lambda v, u: f"{v:g} {u}",
            st.floats(min_value=1e-6, max_value=1e9),
            st.sampled_from(["us", "ms", "ns", "s", "GB", "%", "x"]),
        ),
    ),
)
@example(text="E0")  # an exponent alone: once found only by a random draw on CI
@example(text="1 x 10^99999")
def test_lab05_prediction_reads_any_string(text):
    from trnlab.exercises import lab05

    result = lab05.predict_tiled.check(text)
    assert "could not read your answer" not in result.message, result.message
    _assert_reasonable(result.message)
    _assert_reasonable(lab05.explain_prediction(text))


def test_the_dma_queue_figures_the_exercises_quote_are_the_catalogues():
    """Lab 03's and lab 05's tiled predictions quote trn1's queue set-up and static-queue rate
    in their text (literal, so importing a lab stays light): they must be the catalogue's."""
    from trnlab import core
    from trnlab.exercises import lab03, lab05

    p = core.core_params("trn1")
    setup = f"{p.dma_queue_interval * 1e6:.2f} us"
    rate = f"{p.dma_static_queue_bandwidth / 1e9:.0f} GB/s"
    for ex in (lab03.tiled_us, lab05.predict_tiled):
        assert setup in ex.question and rate in ex.question, ex.key
        assert setup.split()[0] in ex.solution_text and rate in ex.solution_text, ex.key
    hints = " ".join(lab03.tiled_us.hints)
    assert setup.split()[0] in hints and rate in hints
