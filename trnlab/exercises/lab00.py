"""Exercises of lab 00 (welcome): a first prediction, a first calculation from the catalogue,
one to practise ``hint()`` on, one read off a dashboard, and finding the lab that covers a
topic. Expected answers come from the catalogue and the syllabus."""

from __future__ import annotations

from typing import Any

from trnlab import catalog

from . import _slips as slips
from ._checks import close_to
from ._exercise import Exercise
from ._predict import Prediction

__all__ = ["bf16_growth", "cores", "hbm", "instance_peak", "which_lab"]

#: The instance of the first two exercises.
INSTANCE = "trn2.48xlarge"
#: The topic of the "which lab?" exercise (a word in one lab's syllabus topics).
TOPIC = "MX"


def _instance_peak_pf() -> float:
    s = catalog.system(INSTANCE)
    # An instance's peak is its chips' peaks added up: chips x per-chip peak.
    return s.chips * s.chip.peak_flops("fp8") / 1e15


instance_peak = Exercise(
    "lab00.instance_peak",
    "A trn2.48xlarge instance holds 16 Trainium2 chips, and one Trainium2 chip peaks at about "
    "1,299 TFLOP/s of dense FP8 (catalog.chip('trn2').peak_flops('fp8')). What is the whole "
    "instance's dense FP8 peak, in PFLOP/s?",
    close_to(
        _instance_peak_pf,
        what="the instance peak",
        unit="PFLOP/s",
        slips=(
            *slips.si_prefixes("PFLOP/s"),
            slips.Slip(1 / 16, "that is one chip's peak; the instance has 16 chips"),
            slips.Slip(
                catalog.chip("trn2").peak_flops("bf16") / catalog.chip("trn2").peak_flops("fp8"),
                "that is the BF16 peak; the question asks for FP8, which Trainium2 runs at "
                "twice the BF16 rate",
            ),
            slips.Slip(
                4.0,
                "that is the sparse figure (4:16 sparsity, up to 4x); the question "
                "asks for the dense peak",
            ),
        ),
    ),
    hints=(
        "The instance's peak is the sum of its chips' peaks.",
        "16 x 1,299 TFLOP/s, then divide by 1,000 to go from TFLOP/s to PFLOP/s.",
    ),
    solution=_instance_peak_pf,
    solution_text="peak_pf = 16 * catalog.chip('trn2').peak_flops('fp8') / 1e15   # about 20.8 "
    "PFLOP/s: the figure AWS prints for trn2.48xlarge",
)


def _cores() -> int:
    s = catalog.system(INSTANCE)
    return s.chips * s.chip.cores


cores = Exercise(
    "lab00.cores",
    "How many NeuronCores does one trn2.48xlarge instance have in all? "
    "(Try lab00.cores.hint() before you answer.)",
    close_to(
        _cores,
        what="the number of NeuronCores",
        unit="NeuronCores",
        slips=(
            slips.Slip(1 / 8, "that is the instance's chips; each chip has several NeuronCores"),
            slips.Slip(1 / 16, "that is one chip's NeuronCores; the instance has 16 chips"),
            slips.Slip(
                0.5,
                "that is what the Neuron runtime shows at its default Logical NeuronCore "
                "configuration (LNC=2 groups two physical NeuronCores into one logical core, "
                "so a trn2.48xlarge presents 64); the question counts the physical NeuronCores",
            ),
        ),
    ),
    hints=(
        "An instance has some chips; each chip has some NeuronCores. Multiply.",
        "catalog.system('trn2.48xlarge').chips gives the chips; "
        "catalog.chip('trn2').cores the NeuronCores per chip.",
    ),
    solution=_cores,
    solution_text="cores = catalog.system('trn2.48xlarge').chips * catalog.chip('trn2').cores"
    "   # 16 chips x 8 NeuronCores = 128 physical cores; the Neuron runtime presents them as 64 "
    "logical NeuronCores at its default LNC=2 (two physical cores each)",
)


def _hbm_gib() -> float:
    return catalog.chip("trn3").hbm_bytes / 2**30


hbm = Exercise(
    "lab00.hbm",
    "Read it off the dashboard: pick the Figure 'HBM capacity' in the ChipExplorer above. "
    "How many GiB of HBM does one Trainium3 chip have?",
    close_to(
        _hbm_gib,
        what="Trainium3's HBM",
        unit="GiB",
        slips=(
            *slips.binary_prefixes("GiB"),
            *slips.si_prefixes("GiB", hi=9),
            slips.Slip(
                catalog.chip("trn2").hbm_bytes / catalog.chip("trn3").hbm_bytes,
                "that is Trainium2's HBM; the question asks about Trainium3",
            ),
            slips.Slip(
                catalog.chip("trn1").hbm_bytes / catalog.chip("trn3").hbm_bytes,
                "that is the first Trainium's HBM; the question asks about Trainium3",
            ),
        ),
    ),
    hints=(
        "In the dashboard, set Figure to the HBM capacity; hover the Trainium3 bar.",
        "Or in code: catalog.chip('trn3').hbm_bytes / 2**30 (a GiB is 2^30 bytes).",
    ),
    solution=_hbm_gib,
    solution_text="hbm_gib = catalog.chip('trn3').hbm_bytes / 2**30   # 144 GiB, 1.5x "
    "Trainium2's 96 GiB",
)


def _bf16_growth() -> float:
    return catalog.chip("trn3").peak_flops("bf16") / catalog.chip("trn1").peak_flops("bf16")


def _explain_bf16_growth(predicted: float, model: float) -> str:
    t1, t3 = catalog.chip("trn1"), catalog.chip("trn3")
    cores = t3.cores / t1.cores
    clocks = t3.core.tensor_clock / t1.core.tensor_clock
    why = (
        f"Trainium3 has {t3.cores} NeuronCores to Trainium's {t1.cores} ({cores:g}x), each with "
        f"the same {t3.core.pe_rows} x {t3.core.pe_cols} BF16 array, but clocked at "
        f"{t3.core.tensor_clock / 1e9:g} GHz instead of {t1.core.tensor_clock / 1e9:g} "
        f"({cores:g} x {clocks:.2f} = {cores * clocks:.1f}x); the chip ratings, a few percent "
        f"above their cores' figures, give {model:.1f}x."
    )
    if predicted > 1.25 * model:
        why += (
            " BF16 grew far less than the headlines: the new silicon went into 8-bit formats "
            "(FP8, MXFP8), which lab 01 follows."
        )
    elif predicted < 0.8 * model:
        why += " More cores per chip did most of it; the clock even went down."
    return why


bf16_growth = Prediction(
    "lab00.bf16_growth",
    "Predict before you run the dashboard: by what factor is a Trainium3 chip's dense BF16 "
    "peak (2025) larger than the first Trainium's (2021)? A guess is fine.",
    _bf16_growth,
    what="the growth",
    unit="x",
    explain=_explain_bf16_growth,
    within=0.25,
    hints=(
        "Four years, two generations: what do you expect from chips of the same family?",
        "Peak = NeuronCores x PEs per core x 2 FLOP x clock: count the cores per chip.",
    ),
    solution_text="growth = catalog.chip('trn3').peak_flops('bf16') / "
    "catalog.chip('trn1').peak_flops('bf16')   # about 3.5x: 4x the cores at a lower clock",
)


def _lab_for(topic: str) -> int:
    from trnlab.course import syllabus

    found = [
        lab.number
        for lab in syllabus.course_map().labs
        if any(topic.lower() == t.lower() for t in lab.topics)
    ]
    if len(found) != 1:
        raise LookupError(f"topic {topic!r} is in labs {found} of the syllabus; expected one")
    return found[0]


def _lab_number(answer: Any) -> int:
    """6, "6", "06", "lab 06", "06_numeric_formats.ipynb" -> 6."""
    if isinstance(answer, bool):
        raise TypeError("a lab number, not True/False")
    if isinstance(answer, int | float):
        return int(answer)
    text = str(answer).strip().lower().removeprefix("lab").strip()
    return int(text.split("_")[0])


def _check_lab(answer: Any) -> str | None:
    """The lab number in ``answer`` against the lab whose syllabus topics hold :data:`TOPIC`."""
    from trnlab.course import syllabus

    try:
        n = _lab_number(answer)
    except (TypeError, ValueError):
        return f"answer with a lab number, such as 3 or '03', not {answer!r}"
    expected = _lab_for(TOPIC)
    if n == expected:
        return None
    course = syllabus.course_map()
    try:
        title = course.lab(n).title
    except KeyError:
        first, last = course.labs[0].number, course.labs[-1].number
        return f"there is no lab {n}; the course map above lists labs {first:02d} to {last:02d}"
    return f"lab {n:02d} is '{title}'; look for a title about how numbers are stored in bits"


which_lab = Exercise(
    "lab00.which_lab",
    "Which lab would you open to learn why one shared scale per block of 32 values (the OCP "
    "MX formats) makes 4- and 8-bit numbers usable? Answer with the lab's number.",
    _check_lab,
    hints=(
        "Look down the titles and outcomes in the course map above.",
        "MX blocks are a numeric format; which lab is about numeric formats?",
    ),
    solution=lambda: _lab_for(TOPIC),
    solution_text="which = 6   # Lab 06, 'Numeric formats: from bits to MX blocks'",
)
