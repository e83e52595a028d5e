"""Exercises of lab 05 (numeric formats). Expected answers are computed with trnlab.formats."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from trnlab import formats

from ._checks import close_to
from ._exercise import Exercise

__all__ = ["e5m2_max", "mx_scale", "rne_sum", "sr_sum"]

e5m2_max = Exercise(
    "lab05.e5m2_max",
    "FP8 E5M2 has 5 exponent bits (bias 15) and 2 mantissa bits, and keeps the all-ones "
    "exponent for Inf/NaN as IEEE formats do. What is its largest finite value?",
    close_to(formats.spec("fp8_e5m2").max, rtol=1e-9, what="the maximum"),
    hints=(
        "The largest usable exponent field is 11110 = 30, i.e. 2^(30 - 15).",
        "The largest significand with 2 mantissa bits is 1.11 in binary = 1.75.",
    ),
    solution=lambda: 1.75 * 2.0**15,
    solution_text="e5m2_max = (1 + 1/2 + 1/4) * 2**(30 - 15)   # 57344",
)


def _mx_scale() -> float:
    block = np.zeros(32, np.float32)
    block[:3] = [100.0, -3.0, 0.01]
    code = int(formats.encode(block, "mxfp8_e4m3").scales.ravel()[0])
    return 2.0 ** (code - formats.E8M0_BIAS)


mx_scale = Exercise(
    "lab05.mx_scale",
    "An MXFP8 (E4M3) block of 32 values has largest magnitude 100. OCP MX v1.0 sets the shared "
    "scale to 2^(floor(log2(amax)) - emax), with emax = 8 for E4M3. What is the scale (a number, "
    "not its exponent)?",
    close_to(_mx_scale(), rtol=1e-9, what="the scale"),
    hints=("floor(log2(100)) = 6, because 64 <= 100 < 128.", "2^(6 - 8)"),
    solution=_mx_scale,
    solution_text="scale = 2.0 ** (6 - 8)   # 0.25: 100 / 0.25 = 400 fits under E4M3's 448",
)


@lru_cache(maxsize=4)
def _fp16_sums(n_add: int = 2048, trajectories: int = 16) -> tuple[float, float]:
    rne = np.array([1024.0], np.float32)
    sr = np.full(trajectories, 1024.0, np.float32)
    for i in range(n_add):
        rne = formats.quantize(rne + np.float32(0.5), "fp16")
        sr = formats.quantize(sr + np.float32(0.5), "fp16", rounding="stochastic", seed=i)
    return float(rne[0]), float(sr.mean())


rne_sum = Exercise(
    "lab05.rne_sum",
    "In FP16, start at 1024 and add 0.5 2048 times, rounding each sum to nearest-even. "
    "What value do you end with?",
    close_to(_fp16_sums()[0], rtol=1e-9, what="the final value"),
    hints=(
        "Near 1024, FP16 values are 1 apart (10 mantissa bits: 2^10 x 2^-10).",
        "1024.5 is exactly halfway between 1024 and 1025: which one is even?",
    ),
    solution=lambda: _fp16_sums()[0],
    solution_text="1024.0: every 1024 + 0.5 ties back to the even 1024, 2048 times over",
)

sr_sum = Exercise(
    "lab05.sr_sum",
    "Same sum with stochastic rounding (round up with probability = the fraction of a step). "
    "About what value does it reach on average?",
    close_to(1024 + 0.5 * 2048, rtol=0.03, what="the average"),
    hints=("Stochastic rounding is unbiased: the expected result of each step is exact.",),
    solution=lambda: _fp16_sums()[1],
    solution_text="about 2048 = 1024 + 2048 x 0.5: unbiased rounding keeps the sum on average",
)
