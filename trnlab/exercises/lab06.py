"""Exercises of lab 06 (numeric formats). Expected answers are computed with trnlab.formats.

The largest-value and MX-scale exercises have a variant per format (``VARIANTS``); the lab's
setup cell calls :func:`setup` with its ``MAX_FORMAT`` and ``MX_FORMAT`` parameters.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from trnlab import formats

from . import _slips as slips
from ._checks import close_to
from ._exercise import Exercise
from ._predict import Prediction
from ._variants import check_variant

__all__ = [
    "DEFAULTS",
    "VARIANTS",
    "max_finite",
    "mx_scale",
    "mx_scale_for",
    "rne_sum",
    "setup",
    "sr_sum",
]

#: Variant space of the exercises: lab parameter -> allowed values (see :func:`setup`).
VARIANTS = {
    "MAX_FORMAT": ["fp8_e5m2", "fp8_e4m3", "fp8_e4m3fn", "fp8_e3m4", "fp16", "bf16"],
    "MX_FORMAT": ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4"],
}
#: The values the committed lab uses.
DEFAULTS = {"MAX_FORMAT": "fp8_e5m2", "MX_FORMAT": "mxfp8_e4m3"}

#: The largest magnitude of the block in the MX scale question.
MX_AMAX = 100.0

# How each kind of format spends its all-ones exponent, in the words of the question.
_SPECIALS = {
    "ieee": "keeps the all-ones exponent for Inf/NaN as IEEE formats do",
    "fn": "has no Inf: the all-ones exponent holds numbers, except all-ones exponent and "
    "mantissa together, which is NaN",
    "finite": "has no Inf or NaN: every bit pattern is a number",
}


def _bits(n: int) -> str:
    return f"{n} bit" if n == 1 else f"{n} bits"


def _max_slips(name: str) -> tuple[slips.Slip, ...]:
    f = formats.spec(name)
    m = f.man_bits
    mant_bits = m - 1 if f.specials == "fn" else m
    significand = 2 - 2.0**-mant_bits
    found = [
        slips.Slip(
            1 / significand,
            f"that leaves out the mantissa: the largest significand is 1.{'1' * mant_bits} in "
            f"binary = {significand:g}, not 1",
            0.001,
        ),
        slips.Slip(
            2 / significand,
            f"the significand stays below 2: 1.{'1' * mant_bits} in binary = {significand:g}",
            0.001,
        ),
        slips.Slip(
            2.0**f.bias,
            f"the exponent field is biased: subtract the bias ({f.bias}) from it",
            0.001,
        ),
    ]
    if f.specials == "ieee":
        found.append(
            slips.Slip(
                2.0,
                "the all-ones exponent is kept for Inf and NaN in this format: the largest "
                "finite number uses the exponent field one below it",
                0.001,
            )
        )
    return tuple(found)


def _max_known(name: str) -> dict[float, str]:
    """Right answers of the other convention: IEEE's rule on an FN format, and the reverse."""
    f = formats.spec(name)
    e, m, bias = f.exp_bits, f.man_bits, f.bias
    if f.specials == "fn":
        ieee = (2 - 2.0**-m) * 2.0 ** (2**e - 2 - bias)
        return {
            ieee: "that follows the IEEE rule (the all-ones exponent kept for Inf/NaN); this "
            "format uses the all-ones exponent for numbers",
            (2 - 2.0**-m) * 2.0 ** (2**e - 1 - bias): "with all-ones exponent and all-ones "
            "mantissa the pattern is NaN in this format, so the largest mantissa ends in 0",
        }
    if f.specials == "ieee":
        fn = (2 - 2.0 ** -(m - 1)) * 2.0 ** (2**e - 1 - bias)
        return {
            fn: "that is the rule of the FN formats (the all-ones exponent holds numbers); "
            "this one keeps the all-ones exponent for Inf and NaN"
        }
    return {}


def _max_finite_exercise(name: str) -> Exercise:
    f = formats.spec(name)
    e, m, bias = f.exp_bits, f.man_bits, f.bias
    # IEEE-like: the top exponent field 2^e - 1 is Inf/NaN, so the largest is 2^e - 2, with an
    # all-ones mantissa. FN (OCP E4M3): the top exponent holds numbers but S.1111.111 is NaN,
    # so the largest mantissa there is all ones but the last bit.
    top = 2**e - 2 if f.specials == "ieee" else 2**e - 1
    mant_bits = m - 1 if f.specials == "fn" else m
    significand = 2 - 2.0**-mant_bits
    ones = "1" * mant_bits + ("0" if f.specials == "fn" else "")
    label = name.replace("fp8_", "FP8 ").upper() if name.startswith("fp8_") else name.upper()
    return Exercise(
        "lab06.max_finite",
        f"{label} has {_bits(e)} of exponent (bias {bias}) and {_bits(m)} of mantissa, and "
        f"{_SPECIALS[f.specials]}. What is its largest finite value?",
        close_to(f.max, what="the maximum", slips=_max_slips(name), known=_max_known(name)),
        hints=(
            f"The largest usable exponent field is {top:0{e}b} = {top}, i.e. 2^({top} - {bias}).",
            f"The largest significand with {_bits(m)} of mantissa is 1.{ones} in binary "
            f"= 2 - 2^-{mant_bits} = {significand:.10g}.",
        ),
        solution=lambda: significand * 2.0 ** (top - bias),
        solution_text=f"max_finite = (2 - 2**-{mant_bits}) * 2**({top} - {bias})   # {f.max:g}",
    )


def _emax(mx_name: str) -> int:
    """The element format's largest power of two (OCP MX v1.0 emax_elem)."""
    return int(np.floor(np.log2(formats.spec(mx_name).element.max)))


def mx_scale_for(amax: float, mx_name: str = "mxfp8_e4m3") -> float:
    """The shared scale trnlab's MX encoder picks for a block whose largest magnitude is amax."""
    block = np.zeros(32, np.float32)
    block[:3] = [amax, -3.0, 0.01]
    code = int(formats.encode(block, mx_name).scales.ravel()[0])
    return 2.0 ** (code - formats.E8M0_BIAS)


def _mx_scale_exercise(mx_name: str) -> Exercise:
    element = formats.spec(mx_name).element
    emax = _emax(mx_name)
    # "mxfp8_e4m3" -> MXFP8 (E4M3); "mxfp4" -> MXFP4 (E2M1), its element's layout.
    base, _, suffix = mx_name.partition("_")
    kind = (suffix or f"e{element.exp_bits}m{element.man_bits}").upper()
    label = f"{base.upper()} ({kind})"
    log2 = int(np.floor(np.log2(MX_AMAX)))
    scale = 2.0 ** (log2 - emax)
    top = MX_AMAX / scale
    if top <= element.max:
        fate = f"{top:g} fits under {kind}'s largest value, {element.max:g}"
    else:
        fate = (
            f"{top:g} is above {kind}'s largest value, {element.max:g}, so it saturates to "
            f"{element.max:g} x {scale:g} = {element.max * scale:g}: the rule can clip amax"
        )
    return Exercise(
        "lab06.mx_scale",
        f"An {label} block of 32 values has largest magnitude {MX_AMAX:g}. OCP MX v1.0 sets the "
        f"shared scale to 2^(floor(log2(amax)) - emax), with emax = {emax} for its "
        f"{element.name.split('_')[-1].upper()} elements (largest value {element.max:g}). What "
        "is the scale (a number, not its exponent)?",
        close_to(
            lambda: mx_scale_for(MX_AMAX, mx_name),
            what="the scale",
            slips=(
                slips.Slip(
                    2.0,
                    "that is one step larger: floor(log2 amax) - (emax - 1), the rule Trainium3's "
                    "quantiser uses (AWS), or a log2 rounded up; the question asks for OCP's "
                    "floor(log2 amax) - emax",
                    0.001,
                ),
                slips.Slip(
                    MX_AMAX / element.max / scale,
                    "that divides amax by the element's largest value; an MX scale is a power "
                    "of two, 2^(floor(log2 amax) - emax)",
                    0.001,
                ),
            ),
            known={
                float(log2 - emax): "that is the exponent; the question asks for the scale, "
                "2 to that power",
                2.0 ** (emax - log2): "that is the inverse of the scale: elements are "
                "amax / scale, and the scale is 2^(floor(log2 amax) - emax)",
            },
        ),
        hints=(
            f"floor(log2({MX_AMAX:g})) = {log2}, because {2**log2} <= {MX_AMAX:g} < "
            f"{2 ** (log2 + 1)}.",
            f"2^({log2} - {emax})",
        ),
        solution=lambda: mx_scale_for(MX_AMAX, mx_name),
        solution_text=f"scale = 2.0 ** ({log2} - {emax})   # {scale:g}: {MX_AMAX:g} / {scale:g} = "
        + fate,
    )


max_finite = _max_finite_exercise(DEFAULTS["MAX_FORMAT"])
mx_scale = _mx_scale_exercise(DEFAULTS["MX_FORMAT"])


def setup(
    *, max_format: str = DEFAULTS["MAX_FORMAT"], mx_format: str = DEFAULTS["MX_FORMAT"]
) -> dict[str, str]:
    """Rebuild the variant-aware exercises for this copy of the lab (its setup cell calls it).

    Parameters
    ----------
    max_format : str
        The format whose largest finite value :data:`max_finite` asks for
        (one of ``VARIANTS["MAX_FORMAT"]``).
    mx_format : str
        The MX format whose shared scale :data:`mx_scale` asks for
        (one of ``VARIANTS["MX_FORMAT"]``).

    Returns
    -------
    dict
        The variant in force, by lab parameter name.
    """
    global max_finite, mx_scale
    fmt = check_variant("lab06", "MAX_FORMAT", max_format, VARIANTS)
    mx = check_variant("lab06", "MX_FORMAT", mx_format, VARIANTS)
    max_finite = _max_finite_exercise(fmt)
    mx_scale = _mx_scale_exercise(mx)
    return {"MAX_FORMAT": fmt, "MX_FORMAT": mx}


@lru_cache(maxsize=4)
def _fp16_sums(n_add: int = 2048, trajectories: int = 16) -> tuple[float, float]:
    rne = np.array([1024.0], np.float32)
    sr = np.full(trajectories, 1024.0, np.float32)
    for i in range(n_add):
        rne = formats.quantize(rne + np.float32(0.5), "fp16")
        sr = formats.quantize(sr + np.float32(0.5), "fp16", rounding="stochastic", seed=i)
    return float(rne[0]), float(sr.mean())


def _explain_rne(predicted: float, model: float) -> str:
    why = (
        "near 1024, FP16's values are 1 apart (10 mantissa bits), so 1024 + 0.5 = 1024.5 lies "
        "exactly halfway between 1024 and 1025, and round-to-nearest-even sends a tie to the "
        "neighbour with an even last bit: 1024. Every one of the 2,048 additions is lost."
    )
    if predicted > 2.5 * 1024:
        why += (
            " Rounding ties up would add a whole 1 each time, but only up to 2048: there FP16's "
            "step becomes 2, and 0.5 is below half a step."
        )
    elif predicted > 1.5 * 1024:
        why += " The exact sum is 2048; FP16 cannot follow it with this rounding."
    return why


rne_sum = Prediction(
    "lab06.rne_sum",
    "Predict before the cells below run it: in FP16, start at 1024 and add 0.5, 2048 times, "
    "rounding each sum to nearest-even. What value do you end with?",
    lambda: _fp16_sums()[0],
    what="the final value",
    unit="",
    explain=_explain_rne,
    within=0.0,
    sig=4,
    hints=(
        "Near 1024, FP16 values are 1 apart (10 mantissa bits: 2^10 x 2^-10).",
        "1024.5 is exactly halfway between 1024 and 1025: which one is even?",
    ),
    solution_text="1024.0: every 1024 + 0.5 ties back to the even 1024, 2048 times over",
)


def _explain_sr(predicted: float, model: float) -> str:
    exact = 1024 + 0.5 * 2048
    why = (
        "stochastic rounding rounds 1024.5 up with probability 0.5 (the fraction of the step "
        f"above 1024), so each addition adds 0.5 on average: the sum follows the exact "
        f"{exact:g}, and the mean of the model's 16 runs lands within a few units of it."
    )
    if predicted < 0.75 * exact:
        why += " Unlike round-to-nearest, no addition is systematically lost: the errors cancel."
    return why


sr_sum = Prediction(
    "lab06.sr_sum",
    "Same sum with stochastic rounding (round up with probability = the fraction of a step). "
    "Predict about what value it reaches on average.",
    lambda: _fp16_sums()[1],
    what="the average",
    unit="",
    explain=_explain_sr,
    within=0.03,
    hints=("Stochastic rounding is unbiased: the expected result of each step is exact.",),
    solution_text="about 2048 = 1024 + 2048 x 0.5: unbiased rounding keeps the sum on average",
)
