"""Exercises of lab 01 (the Trainium family). Expected answers come from the catalogue.

The clock exercise has a variant per chip (``VARIANTS``); the lab's setup cell calls
:func:`setup` with its ``CLOCK_CHIP`` parameter.
"""

from __future__ import annotations

from trnlab import catalog

from . import _slips as slips
from ._checks import choice, close_to
from ._exercise import Exercise
from ._predict import Prediction
from ._variants import check_variant

__all__ = [
    "DEFAULTS",
    "VARIANTS",
    "bandwidth",
    "bandwidth_implied",
    "clock",
    "growth",
    "implied_clock_ghz",
    "ridge_bf16",
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


def _clock_slips(chip: str) -> tuple[slips.Slip, ...]:
    c = catalog.chip(chip)
    core = c.core
    implied = implied_clock_ghz(chip)
    found = [
        *slips.si_prefixes("GHz", hi=9),
        *slips.mac_flops(ratio=2.0),
        slips.Slip(
            float(c.cores), f"the rating is for the whole chip: divide by its {c.cores} NeuronCores"
        ),
        slips.Slip(
            float(core.pe_cols),
            f"a core has {core.pe_rows} x {core.pe_cols} PEs, not {core.pe_rows}",
        ),
    ]
    documented = core.tensor_clock / 1e9
    if abs(documented / implied - 1) > 0.01:
        found.append(
            slips.Slip(
                documented / implied,
                f"is that {core.name}'s documented clock ({documented:g} GHz)? The question "
                "asks for the clock the chip's rating implies",
                0.005,
            )
        )
    fp8 = max(c.peak_flops(d) for d in ("fp8", "mxfp8") if d in c.dtypes)
    if fp8 > 1.05 * c.peak_flops("bf16"):
        found.append(
            slips.Slip(
                fp8 / c.peak_flops("bf16"),
                "that starts from the 8-bit rating; the question gives the BF16 one",
            )
        )
    return tuple(found)


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
            what="the clock",
            unit="GHz",
            slips=_clock_slips(chip),
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
    close_to(
        _growth,
        what="the growth factor",
        unit="x",
        slips=lambda: (
            slips.Slip(
                1 / _growth() ** 2,
                "that is the ratio the other way round: Trainium3's peak goes on top",
            ),
            slips.Slip(
                catalog.chip("trn3").peak_flops("bf16")
                / catalog.chip("trn1").peak_flops("bf16")
                / _growth(),
                "that is how much BF16 grew; the question asks about the 8-bit peak",
            ),
            slips.Slip(
                catalog.chip("trn2").peak_flops("fp8")
                / catalog.chip("trn1").peak_flops("fp8")
                / _growth(),
                "that stops at Trainium2 (FP8); the question asks about Trainium3 (MXFP8)",
            ),
        ),
    ),
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
    close_to(
        _implied_gbs,
        what="the per-chip bandwidth",
        unit="GB/s",
        slips=lambda: (
            *slips.si_prefixes("GB/s"),
            *slips.binary_prefixes("GB/s"),
            slips.Slip(16.0, "that is the whole instance; divide by its 16 chips"),
            slips.Slip(0.5, "that divides by the 32 NeuronCores; the question asks per chip"),
            slips.Slip(
                catalog.chip("trn1").hbm_bandwidth / 1e9 / _implied_gbs(),
                "that is the chip documentation's figure; the question asks what AWS's 9.8 TB/s "
                "for the instance implies",
                0.005,
            ),
        ),
    ),
    hints=("Divide the instance figure by its number of chips.", "9.8e12 / 16, in GB/s."),
    solution=_implied_gbs,
    solution_text="per_chip_gbs = 9.8e12 / 16 / 1e9   # 612.5 GB/s, not the 820 GB/s the "
    "chip documentation gives: one of the two figures is wrong, or counts differently.",
)

#: The exercise under the name its messages print ("lab01.bandwidth"), so that
#: lab01.bandwidth.hint() works as the check's output suggests.
bandwidth = bandwidth_implied

trust = Exercise(
    "lab01.trust",
    "A glossary says a Trainium chip has 4 NeuronCores with 32 MB of SRAM each; the Neuron "
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
    # The catalogue's list of contradicted claims says which source is wrong.
    giveaways=("trn1.claims.cores",),
    solution=lambda: "docs",
    solution_text="trust = 'docs'   # 16 chips x 2 cores = the 32 NeuronCores AWS lists for trn1.32xlarge",
)


def _ridge_bf16(chip: str = "trn3") -> float:
    c = catalog.chip(chip)
    # Ridge point of the roofline: peak FLOP/s over bandwidth (Williams et al., 2009).
    return c.peak_flops("bf16") / c.hbm_bandwidth


def _explain_ridge(predicted: float, model: float) -> str:
    t2, t3 = catalog.chip("trn2"), catalog.chip("trn3")
    compute = t3.peak_flops("bf16") / t2.peak_flops("bf16")
    memory = t3.hbm_bandwidth / t2.hbm_bandwidth
    best = t3.peak_flops("mxfp8") / t3.hbm_bandwidth
    why = (
        f"from Trainium2 to Trainium3 the BF16 peak grew only {compute:.2f}x while HBM bandwidth "
        f"grew {memory:.2f}x, so the BF16 ridge fell from {_ridge_bf16('trn2'):.0f} to "
        f"{model:.0f} FLOP/B: a BF16 kernel needs less re-use on Trainium3. The 8-bit ridge "
        f"rose instead (MXFP8 runs at 4x the BF16 rate: {best:.0f} FLOP/B)."
    )
    if predicted > 1.25 * model:
        why += " The rising ridge is the 8-bit story; in BF16, memory caught up with compute."
    return why


ridge_bf16 = Prediction(
    "lab01.ridge_bf16",
    "Predict before the next cell computes it: Trainium3's ridge point in BF16 (its dense "
    "BF16 peak over its HBM bandwidth), in FLOP per byte. Use the table of section 1, or "
    "reason from the trends above.",
    _ridge_bf16,
    what="the ridge point",
    unit="FLOP/B",
    explain=_explain_ridge,
    within=0.1,
    hints=(
        "Ridge = peak FLOP/s / bandwidth in B/s.",
        "Trainium3: 671 TFLOP/s of BF16 over 4.9 TB/s of HBM.",
    ),
    solution_text="ridge = catalog.chip('trn3').peak_flops('bf16') / "
    "catalog.chip('trn3').hbm_bandwidth   # about 137 FLOP/B, lower than Trainium2's 230",
)
