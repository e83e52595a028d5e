"""Exercises of lab 09 (cost, energy and vendor claims). Expected answers come from the model."""

from __future__ import annotations

from trnlab import catalog

from ._checks import choice, close_to
from ._exercise import Exercise

__all__ = ["compute_ratio", "implied_trn2_power", "which_follows"]


def _ratio() -> float:
    gen2 = catalog.system("trn3-ultraserver-gen2").peak_flops("mxfp8")
    trn2 = catalog.system("trn2-ultraserver").peak_flops("fp8")
    return gen2 / trn2


compute_ratio = Exercise(
    "lab09.compute_ratio",
    "AWS says a Trn3 UltraServer has 4.4x the compute of a Trn2 UltraServer. From the catalogue, "
    "what is the ratio of their dense 8-bit peaks (Trn3 Gen2 MXFP8 over Trn2 FP8)?",
    close_to(_ratio(), rtol=0.002, what="the ratio"),
    hints=(
        "catalog.system('trn3-ultraserver-gen2').peak_flops('mxfp8')",
        "... divided by catalog.system('trn2-ultraserver').peak_flops('fp8')",
    ),
    solution=_ratio,
    solution_text="144 x 2.517 PF / (64 x 1.299 PF) = 4.36: the 4.4x follows from published specs",
)


def _implied_power() -> float:
    # "4x energy efficiency": (Trn3 peak per W) / (Trn2 peak per W) = 4
    trn3, trn2 = catalog.chip("trn3"), catalog.chip("trn2")
    return 4 * trn3.power * trn2.peak_flops("fp8") / trn3.peak_flops("mxfp8")


implied_trn2_power = Exercise(
    "lab09.implied_power",
    "Trainium3 is estimated at about 1,000 W per chip; no source gives Trainium2's power. If "
    "'4x energy efficiency' meant peak 8-bit FLOPs per watt, what Trainium2 power (W) would it "
    "imply?",
    close_to(_implied_power(), rtol=0.01, what="the implied power", unit="W"),
    hints=(
        "Efficiency = peak / power. Set (2.517e15 / 1000) / (1.299e15 / P) = 4.",
        "P = 4 x 1000 x 1.299 / 2.517",
    ),
    solution=_implied_power,
    solution_text="P = 4 * 1000 * 1.299e15 / 2.517e15   # about 2,060 W: implausible for one chip, "
    "so the claim must count more than chip peaks (utilisation, system power)",
)

which_follows = Exercise(
    "lab09.which_follows",
    "Which claim follows from the published chip and system specifications alone: "
    "'4.4x compute' or '5x tokens per megawatt'?",
    choice(
        "4.4x compute",
        ["4.4x compute", "5x tokens per megawatt"],
        explain={
            "5x tokens per megawatt": "tokens per MW needs power figures the sources do not give "
            "for Trainium2, and depends on the serving setup: it rests on assumptions"
        },
    ),
    hints=("Which one can you compute from figures in catalog.system(...) with no assumption?",),
    solution=lambda: "4.4x compute",
    solution_text="'4.4x compute': 144 x 2.517 PF / (64 x 1.299 PF) = 4.36",
)
