"""Exercises of lab 01 (the Trainium family). Expected answers come from the catalogue.

The clock exercise has a variant per chip (``VARIANTS``); the lab's setup cell calls
:func:`setup` with its ``CLOCK_CHIP`` parameter.
"""

from __future__ import annotations

from trnlab import catalog

from ._checks import choice, close_to
from ._exercise import Exercise
from ._variants import check_variant

__all__ = [
    "DEFAULTS",
    "VARIANTS",
    "bandwidth_implied",
    "clock",
    "growth",
    "implied_clock_ghz",
    "setup",
    "trust",
]

#: Variant space of the exercises: lab parameter -> allowed values (see :func:`setup`).
VARIANTS = {"CLOCK_CHIP": ["trn1", "trn2", "trn3"]}
#: The values the committed lab uses.
DEFAULTS = {"CLOCK_CHIP": "trn2"}


def implied_clock_ghz(chip: str) -> float:
    """The Tensor Engine clock a chip's dense BF16 rating implies, in GHz."""
    c = catalog.chip(chip)
    core = c.core
    # peak = cores x rows x cols x 2 FLOP x clock  =>  clock = peak / (cores x rows x cols x 2)
    return c.peak_flops("bf16") / (c.cores * core.pe_rows * core.pe_cols * 2) / 1e9


def _clock_exercise(chip: str) -> Exercise:
    c = catalog.chip(chip)
    core = c.core
    tflops = c.peak_flops("bf16") / 1e12
    rows, cols = core.pe_rows, core.pe_cols
    implied = implied_clock_ghz(chip)
    documented = core.tensor_clock / 1e9
    formula = f"{tflops:g}e12 / ({c.cores} * {rows} * {cols} * 2)"
    return Exercise(
        "lab01.clock",
        f"{c.name} is rated at {tflops:g} dense BF16 TFLOPS per chip. It has {c.cores} "
        f"NeuronCores, each with a {rows} x {cols} systolic array doing one multiply-accumulate "
        "per PE per cycle. What tensor-engine clock (in GHz) does the rating imply?",
        close_to(
            implied,
            rtol=0.005,
            what="the clock",
            unit="GHz",
            # Without this, the documented clock (6-7% below the implied one on Trainium2/3)
            # would be explained as a GiB-versus-GB slip (a factor of 1.074).
            slips={
                2**30 / 1e9: f"a few percent - is that {core.name}'s documented clock? The "
                "question asks for the clock the chip's rating implies"
            },
        ),
        hints=(
            "Peak FLOP/s = cores x PEs per core x FLOP per PE per cycle x clock.",
            f"A multiply-accumulate counts as 2 FLOPs; a core has {rows} x {cols} PEs.",
            f"clock = {formula}, then divide by 1e9 for GHz.",
        ),
        solution=lambda: implied_clock_ghz(chip),
        solution_text=f"clock_ghz = {formula} / 1e9   # about {implied:.2f} GHz, "
        f"{abs(implied / documented - 1):.0%} {'above' if implied > documented else 'below'} the "
        f"documented {documented:g} GHz of {core.name}: the chip rating and the per-core "
        "figures do not agree.",
    )


clock = _clock_exercise(DEFAULTS["CLOCK_CHIP"])


def setup(*, clock_chip: str = DEFAULTS["CLOCK_CHIP"]) -> dict[str, str]:
    """Rebuild the variant-aware exercises for this copy of the lab (its setup cell calls it).

    Parameters
    ----------
    clock_chip : {"trn1", "trn2", "trn3"}
        The chip whose clock :data:`clock` asks to derive from its BF16 rating.

    Returns
    -------
    dict
        The variant in force, by lab parameter name.
    """
    global clock
    chip = check_variant("lab01", "CLOCK_CHIP", clock_chip, VARIANTS)
    clock = _clock_exercise(chip)
    return {"CLOCK_CHIP": chip}


def _growth() -> float:
    return catalog.chip("trn3").peak_flops("mxfp8") / catalog.chip("trn1").peak_flops("fp8")


growth = Exercise(
    "lab01.growth",
    "By what factor did the dense 8-bit peak of one chip grow from Trainium (cFP8) to "
    "Trainium3 (MXFP8)? Use catalog.chip(...).peak_flops(...).",
    close_to(_growth(), rtol=0.01, what="the growth factor"),
    hints=(
        "Trainium runs cFP8 at its BF16 rate: catalog.chip('trn1').peak_flops('fp8').",
        "Divide catalog.chip('trn3').peak_flops('mxfp8') by that.",
    ),
    solution=_growth,
    solution_text="growth = catalog.chip('trn3').peak_flops('mxfp8') / "
    "catalog.chip('trn1').peak_flops('fp8')   # about 13x in three generations",
)


def _implied_gbs() -> float:
    s = catalog.system("trn1.32xlarge")
    return s.published["hbm_bandwidth"].value / s.chips / 1e9


bandwidth_implied = Exercise(
    "lab01.bandwidth",
    "AWS prints 9.8 TB/s of HBM bandwidth for trn1.32xlarge (16 Trainium chips). What "
    "per-chip bandwidth, in GB/s, does that imply?",
    close_to(_implied_gbs(), rtol=0.01, what="the per-chip bandwidth", unit="GB/s"),
    hints=("Divide the instance figure by its number of chips.", "9.8e12 / 16, in GB/s."),
    solution=_implied_gbs,
    solution_text="per_chip_gbs = 9.8e12 / 16 / 1e9   # 612.5 GB/s, not the 820 GB/s the "
    "chip documentation gives: one of the two figures is wrong, or counts differently.",
)

trust = Exercise(
    "lab01.trust",
    "One source says a Trainium chip has 4 NeuronCores with 32 MB of SRAM each; the Neuron "
    "documentation says 2 NeuronCore-v2 with 24 MiB of SBUF each. Which do you build on: "
    "'docs' or 'glossary'?",
    choice(
        "docs",
        ["docs", "glossary"],
        explain={
            "glossary": "the glossary entry also gets Trainium2's HBM wrong (192 GB vs 96 GiB); "
            "the docs agree with two independent articles and with the aggregate totals."
        },
    ),
    hints=(
        "Which source agrees with the others, and with totals you can recompute "
        "(trn1.32xlarge has 32 cores = 16 chips x ?)",
    ),
    solution=lambda: "docs",
    solution_text="trust = 'docs'   # 16 chips x 2 cores = the 32 NeuronCores AWS lists for trn1.32xlarge",
)
