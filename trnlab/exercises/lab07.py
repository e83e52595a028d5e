"""Exercises of lab 07 (structured sparsity). Expected answers come from the model."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from trnlab import catalog, formats

from . import _slips as slips
from ._checks import choice, close_to
from ._exercise import Exercise
from ._predict import Prediction

__all__ = ["best_pattern", "kept", "prune_error", "trn2_sparse", "trn2_sparse_pf"]

#: The size of the lab's weight matrix (its default SIZE parameter).
SIZE = 256

kept = Exercise(
    "lab07.kept",
    "What fraction of the weights does 4:16 structured sparsity keep?",
    close_to(
        4 / 16,
        what="the fraction",
        slips=(
            *slips.fraction_vs_percent("fraction"),
            slips.Slip(3.0, "that is the fraction pruned away; the question asks what is kept"),
            slips.Slip(16.0, "that is the speed-up M/N = 4; the fraction kept is N/M"),
        ),
    ),
    hints=("At most N non-zeros in every M consecutive weights.",),
    solution=lambda: 4 / 16,
    solution_text="kept = 4 / 16   # 0.25: a quarter of the weights, hence up to 4x",
)


def _trn2_sparse_pf() -> float:
    return catalog.chip("trn2").peak_flops("fp8", pattern="4:16") / 1e15


def _sparse_slips() -> tuple[slips.Slip, ...]:
    trn2 = catalog.chip("trn2")
    right = _trn2_sparse_pf()
    docs = [fig for dtypes, fig in trn2.published_sparse if "fp8" in dtypes]
    found = [
        *slips.si_prefixes("PFLOP/s"),
        slips.Slip(
            trn2.peak_flops("bf16", pattern="4:16") / 1e15 / right,
            "that is 4x the BF16 rate; the question asks about FP8, which runs at twice the "
            "BF16 rate on Trainium2",
            0.005,
        ),
        slips.Slip(
            0.5, "that is a 2x speed-up (2:4 or 4:8); 4:16 keeps a quarter: up to 4x", 0.005
        ),
        slips.Slip(16.0, "that is the whole trn2.48xlarge (16 chips); the question is per chip"),
    ]
    for fig in docs:
        found.append(
            slips.Slip(
                fig.value / 1e15 / right,
                "that is the Trainium2 page's one sparse figure for every type; the question "
                "asks what 4x on FP8 (AWS's instance figure) promises",
                0.005,
            )
        )
    return tuple(found)


trn2_sparse_pf = Exercise(
    "lab07.trn2_sparse",
    "Trainium2 is rated at 1.299 PFLOP/s of dense FP8. What does 4:16 sparsity promise, in "
    "PFLOP/s, if the speed-up applies to FP8 (as AWS's 83.2 PF instance figure assumes)?",
    close_to(_trn2_sparse_pf, what="the peak", unit="PFLOP/s", slips=_sparse_slips),
    hints=("4:16 keeps a quarter of the weights: up to 4x.",),
    solution=_trn2_sparse_pf,
    solution_text="1.299 * 4   # 5.2 PF; the Trainium2 docs quote only 2.56 PF sparse per chip",
)

#: The exercise under the name its messages print ("lab07.trn2_sparse"), so that
#: lab07.trn2_sparse.hint() works as the check's output suggests.
trn2_sparse = trn2_sparse_pf


@lru_cache(maxsize=1)
def _errors_at_4x(size: int = SIZE) -> dict[str, float]:
    w = formats.sample("weights", (size, size), seed=0)
    return {
        p: formats.prune(w, *map(int, p.split(":")), axis=0).rel_error
        for p in ("4:16", "2:8", "1:4")
    }


def _best() -> str:
    errors = _errors_at_4x()
    return min(errors, key=errors.get)


best_pattern = Exercise(
    "lab07.best_pattern",
    "4:16, 2:8 and 1:4 all keep a quarter of the weights (4x). Which one will lose the least "
    "weight energy when the next cell prunes the lab's weight matrix by magnitude: '4:16', "
    "'2:8' or '1:4'?",
    choice(
        _best(),
        ["4:16", "2:8", "1:4"],
        explain={
            p: "a longer group lets pruning keep the largest weights wherever they sit; a "
            "shorter one forces a pick from every few, even where all of them are small"
            for p in ("4:16", "2:8", "1:4")
            if p != _best()
        },
    ),
    hints=(
        "Pruning keeps the largest N of every M. Which pattern constrains where the kept "
        "weights may sit the least?",
    ),
    solution=_best,
    solution_text="'4:16': within 16 weights, any 4 may survive, so fewer large weights are lost",
    # The error table decides it: 4:16's weight error, the smallest of the three.
    giveaways=(f"{_errors_at_4x()['4:16']:.1%}",),
)


@lru_cache(maxsize=1)
def _pruned_matmul(size: int = SIZE) -> tuple[float, float]:
    """(matmul relative error in %, share of weight energy kept) of 4:16 pruning."""
    w = formats.sample("weights", (size, size), seed=0)
    x = formats.sample("gaussian", (size, size), seed=1)
    r = formats.prune(w, 4, 16, axis=0)  # axis 0 of w is the contraction axis of x @ w
    ref = x.astype(np.float64) @ w.astype(np.float64)
    out = x.astype(np.float64) @ r.weights.astype(np.float64)
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref) * 100), float(r.energy_kept)


def _explain_prune(predicted: float, model: float) -> str:
    _, energy = _pruned_matmul()
    why = (
        f"magnitude pruning removes the smallest three quarters of each group of 16, and on "
        f"these trained-looking (heavy-tailed) weights the kept quarter holds {energy:.0%} of "
        f"the weights' energy (sum of squares). The error is the square root of the energy "
        f"removed, sqrt({1 - energy:.2f}) = {np.sqrt(1 - energy):.0%}, and x @ w inherits it "
        "because x mixes every weight."
    )
    if predicted > 1.3 * model:
        why += (
            " A figure near 75% counts the weights removed, not their size: the removed ones "
            "are the small ones."
        )
    elif predicted < 0.7 * model:
        why += (
            " Small weights are not nothing: the three quarters removed still carry about a "
            "fifth of the energy, and the error grows as its square root."
        )
    return why


prune_error = Prediction(
    "lab07.prune_error",
    "Predict before the next cell runs it: the lab's weight matrix (trained-looking weights, "
    "dense-trained) is pruned to 4:16 by magnitude, removing three quarters of the weights. "
    "By how much does x @ w change: its relative error (norm of the change over norm of the "
    "result), in percent?",
    lambda: _pruned_matmul()[0],
    what="the error",
    unit="%",
    explain=_explain_prune,
    within=0.25,
    slips=slips.fraction_vs_percent("percent"),
    hints=(
        "Pruning keeps the largest 4 of every 16 weights: the kept ones are the big ones.",
        "Relative error = sqrt(energy removed / energy): how much of the energy sits in the "
        "smallest three quarters of a heavy-tailed distribution?",
    ),
    solution_text="about 42%: the kept quarter holds about 82% of the energy; sqrt(0.18) = 0.42",
)
