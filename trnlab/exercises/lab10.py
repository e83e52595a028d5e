"""Exercises of lab 10 (cost, energy and vendor claims). Expected answers come from the model."""

from __future__ import annotations

from functools import lru_cache

from trnlab import catalog

from . import _slips as slips
from ._checks import choice, close_to
from ._exercise import Exercise
from ._predict import Prediction

__all__ = ["compute_ratio", "implied_power", "implied_trn2_power", "tokens_per_mw", "which_follows"]


def _ratio() -> float:
    gen2 = catalog.system("trn3-ultraserver-gen2").peak_flops("mxfp8")
    trn2 = catalog.system("trn2-ultraserver").peak_flops("fp8")
    return gen2 / trn2


compute_ratio = Exercise(
    "lab10.compute_ratio",
    "AWS says a Trn3 UltraServer has 4.4x the compute of a Trn2 UltraServer. From the catalogue, "
    "what is the ratio of their dense 8-bit peaks (Trn3 Gen2 MXFP8 over Trn2 FP8)?",
    close_to(
        _ratio,
        what="the ratio",
        unit="x",
        slips=lambda: (
            slips.Slip(1 / _ratio() ** 2, "that is the ratio the other way round: Trn3 on top"),
            slips.Slip(
                catalog.chip("trn3").peak_flops("mxfp8")
                / catalog.chip("trn2").peak_flops("fp8")
                / _ratio(),
                "that is one chip against one chip; an UltraServer has 144 (Trn3 Gen2) or 64 "
                "(Trn2) of them",
                0.005,
            ),
            slips.Slip(
                catalog.system("trn3-ultraserver-gen1").peak_flops("mxfp8")
                / catalog.system("trn2-ultraserver").peak_flops("fp8")
                / _ratio(),
                "that is the 64-chip Trn3 Gen1; the question's Trn3 UltraServer is the "
                "144-chip Gen2",
                0.005,
            ),
            slips.Slip(
                catalog.system("trn3-ultraserver-gen2").peak_flops("mxfp8")
                / catalog.system("trn2-ultraserver").peak_flops("bf16")
                / _ratio(),
                "that divides by Trn2's BF16 peak; the question compares 8-bit peaks (FP8)",
                0.005,
            ),
        ),
        known={4.4: "that is AWS's claim; the question asks what the catalogue's figures give"},
    ),
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
    "lab10.implied_power",
    "Trainium3 is estimated at about 1,000 W per chip; no source gives Trainium2's power. If "
    "'4x energy efficiency' meant peak 8-bit FLOPs per watt, what Trainium2 power (W) would it "
    "imply?",
    close_to(
        _implied_power,
        what="the implied power",
        unit="W",
        slips=lambda: (
            *slips.si_prefixes("W", hi=6),
            slips.Slip(
                1 / 16,
                "that divides by 4 where it should multiply: a 4x better Trn3 means Trn2 "
                "spends 4x the power per FLOP",
            ),
            slips.Slip(
                catalog.chip("trn2").peak_flops("bf16") / catalog.chip("trn2").peak_flops("fp8"),
                "that uses Trainium2's BF16 peak; the question compares 8-bit peaks (FP8)",
                0.005,
            ),
        ),
    ),
    hints=(
        "Efficiency = peak / power. Set (2.517e15 / 1000) / (1.299e15 / P) = 4.",
        "P = 4 x 1000 x 1.299 / 2.517",
    ),
    solution=_implied_power,
    solution_text="P = 4 * 1000 * 1.299e15 / 2.517e15   # about 2,060 W: implausible for one chip, "
    "so the claim must count more than chip peaks (utilisation, system power)",
)

#: The exercise under the name its messages print ("lab10.implied_power"), so that
#: lab10.implied_power.hint() works as the check's output suggests.
implied_power = implied_trn2_power

which_follows = Exercise(
    "lab10.which_follows",
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
    # The table of section 2 computes the ratio that decides it.
    giveaways=("4.36",),
    solution=lambda: "4.4x compute",
    solution_text="'4.4x compute': 144 x 2.517 PF / (64 x 1.299 PF) = 4.36",
)


#: The Trainium2 power the lab assumes (no source gives one): its TRN2_WATTS default.
TRN2_WATTS = 500.0
#: Tokens per second each user sees in the comparison (the lab's PER_USER default).
PER_USER = 20
#: Batches the serving comparison tries: every multiple of 8, so that the busiest one that
#: meets the latency target is found to within 8 sequences.
SERVE_BATCHES = tuple(range(8, 1025, 8))


@lru_cache(maxsize=1)
def _serving() -> dict:
    from trnlab import scale

    points = {}
    for key, system, fmt, watts in (
        ("trn2", "trn2.48xlarge", "fp8_e4m3", TRN2_WATTS),
        ("trn3", "trn3-ultraserver-gen2", "mxfp8_e4m3", None),
    ):
        points[key] = scale.tokens_per_megawatt_at(
            "llama3-70b",
            system,
            PER_USER,
            tp=4,
            prompt=2048,
            output=256,
            weight_format=fmt,
            watts_per_chip=watts,
            batches=SERVE_BATCHES,
        )
    return points


def _tokens_per_mw() -> float:
    p = _serving()
    return p["trn3"].tokens_per_megawatt / p["trn2"].tokens_per_megawatt


def _explain_tokens(predicted: float, model: float) -> str:
    from trnlab.scale._memory_bound import stream_bandwidth

    p = _serving()
    t2, t3 = p["trn2"], p["trn3"]
    per_chip = t3.tokens_per_second_per_chip / t2.tokens_per_second_per_chip
    power = t3.result.watts_per_chip / t2.result.watts_per_chip
    trn2, trn3 = catalog.chip("trn2"), catalog.chip("trn3")
    bw = stream_bandwidth(trn3) / stream_bandwidth(trn2)
    size = (
        "a bigger batch"
        if t3.batch > t2.batch
        else ("the same batch" if t3.batch == t2.batch else "a smaller batch")
    )
    why = (
        f"at {PER_USER} tokens/s per user Trainium3 serves {size} ({t3.batch} against "
        f"{t2.batch}) and makes {per_chip:.1f}x the tokens per chip. Where a token's time goes "
        f"at those batches: Trainium2 {t2.result.time_split()}; Trainium3 "
        f"{t3.result.time_split()}. Trainium3 streams the weights {bw:.1f}x as fast (its cores' "
        f"DMA engines move {trn3.core.dma_bandwidth * trn3.cores / 1e12:.1f} of its "
        f"{trn3.hbm_bandwidth / 1e12:.1f} TB/s of HBM bandwidth); the batch shares that cost, "
        f"while each sequence's walk over its KV cache adds its own bytes and so grows with "
        f"the batch (how far walks overlap in a batch is an assumption, checked on Trainium's "
        f"published batch 4 and 8 decode times). At "
        f"{power:.1f}x the power per chip (1,000 W estimated against {TRN2_WATTS:.0f} W "
        f"assumed) that is {model:.1f}x per megawatt."
    )
    if predicted > 1.5 * model:
        why += (
            " The claimed 'over 5x' needs more than the chips: a lower Trainium2 power, MXFP4, "
            "larger batches at a looser latency, or system-level effects."
        )
    return why


tokens_per_mw = Prediction(
    "lab10.tokens_per_mw",
    f"Predict before the next cell runs the model: serving Llama 3 70B (4-way tensor "
    f"parallel) so that every user sees {PER_USER} tokens/s, how many times Trainium2's output "
    f"tokens per megawatt does Trainium3 produce? Assume {TRN2_WATTS:.0f} W per Trainium2 (the "
    "lab's TRN2_WATTS) and 1,000 W per Trainium3; AWS claims over 5x.",
    _tokens_per_mw,
    what="the ratio",
    unit="x",
    explain=_explain_tokens,
    within=0.25,
    hints=(
        "Each generated token streams every weight from HBM once (the batch shares it) and, "
        "for every sequence of the batch, walks that sequence's KV cache on the NeuronCores' "
        "engines (the batch does not share that).",
        "Tokens per MW = tokens per second per chip / watts per chip: compare both factors.",
    ),
    solution_text="the busiest batch within the latency on each chip, its tokens per second "
    "per chip, divided by the power ratio (1,000 W / TRN2_WATTS): the next cell's printout "
    "gives each factor",
)
