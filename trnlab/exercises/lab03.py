"""Exercises of lab 03 (the tiled matmul). Expected answers come from runs of the reference
kernels on the NeuronCore model (timing only), computed on first use."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ._checks import choice, close_to
from ._exercise import Exercise

__all__ = ["SHAPE", "first_compute_bound", "matmul_ns", "reloads", "tiled_bytes"]

#: The shape the questions are about: A[256 x 512] @ B[512 x 1024], bf16, on trn1.
SHAPE = (256, 512, 1024)
#: The larger shape of the progression question.
BIG = (1024, 2048, 2048)


@lru_cache(maxsize=8)
def _run(variant: str, m: int, k: int, n: int, chip: str = "trn1"):
    from trnlab import kernels

    return kernels.matmul((m, k), (k, n), variant=variant, chip=chip, numerics=False)


def _reloads() -> float:
    """Loads of each A tile: loads reading a_t over the distinct a_t regions they read."""
    r = _run("tiled", *SHAPE)
    t = r.program.table
    a = next(x.id for x in r.program.tensors if x.name == "a_t")
    sel = (t["op"] == 0) & (t["hbm"] == a)
    regions = {tuple(int(v) for v in reg) for reg in t["hbm_region"][sel]}
    return int(sel.sum()) / len(regions)


def _matmul_ns() -> float:
    r = _run("tiled", *SHAPE)
    mm = np.flatnonzero(r.program.table["op"] == 2)
    return float((r.end[mm[0]] - r.start[mm[0]]) * 1e9)


def _tiled_bytes() -> float:
    return float(_run("tiled", *SHAPE).hbm_bytes)


def _first_compute_bound() -> str:
    from trnlab import kernels

    for v in kernels.VARIANTS:
        if _run(v, *BIG).bound == "compute":
            return v
    return "none"


def _close(fn, **kw):
    """``close_to`` whose expected value is computed when first checked (keeps import light)."""

    def check(answer):
        return close_to(fn(), **kw)(answer)

    return check


reloads = Exercise(
    "lab03.reloads",
    "The tiled kernel computes C = A @ B for A[256 x 512] and B[512 x 1024] in tiles of "
    "128 (K) x 128 (M) x 512 (N), loading an A tile and a B tile for every matmul. How many "
    "times is each 128 x 128 tile of A loaded from HBM?",
    _close(
        _reloads,
        rtol=1e-9,
        what="the number of loads",
        slips={2.0: "a factor of 2 - an A tile is loaded again for every N tile"},
    ),
    hints=(
        "The loops are: for each M tile, for each N tile, for each K tile: load, load, matmul.",
        "An A tile (one M tile, one K tile) is needed once for every N tile.",
        "N / 512 = 1024 / 512.",
    ),
    solution=_reloads,
    solution_text="reloads = 1024 // 512   # 2: once per N tile; hoisting the loads out of "
    "the N loop makes it 1",
)


matmul_ns = Exercise(
    "lab03.matmul_ns",
    "On trn1 (Tensor Engine clock 2.8 GHz), a matmul takes max(N, 64) cycles for the moving "
    "tile, plus ceil(K / 4) cycles to load a new stationary tile (fast weight load, 4 rows per "
    "cycle). How many nanoseconds does one bf16 matmul of a [128 x 128] stationary tile by a "
    "[128 x 512] moving tile take, with a new stationary tile?",
    _close(
        _matmul_ns,
        rtol=0.01,
        what="the time",
        unit="ns",
        slips={
            2**30 / 1e9: "about 6% - count the ceil(K / 4) = 32 cycles of the stationary load too"
        },
    ),
    hints=(
        "The moving tile has N = 512 columns: max(512, 64) = 512 cycles.",
        "Loading the stationary tile: ceil(128 / 4) = 32 cycles.",
        "(512 + 32) cycles / 2.8e9 cycles per second, in ns.",
    ),
    solution=_matmul_ns,
    solution_text="matmul_ns = (512 + 128 / 4) / 2.8e9 * 1e9   # 194.3 ns",
)

tiled_bytes = Exercise(
    "lab03.tiled_bytes",
    "How many bytes does the tiled kernel move between HBM and SBUF for A[256 x 512] @ "
    "B[512 x 1024] in bf16 (2 bytes per value), C stored once in bf16?",
    _close(_tiled_bytes, rtol=0.001, what="the bytes moved", unit="B"),
    hints=(
        "Three parts: A as often as it is re-loaded, B likewise, C once.",
        "A (256 x 512 x 2 B) is loaded N / 512 = 2 times; B (512 x 1024 x 2 B) M / 128 = 2 times.",
        "C is 256 x 1024 x 2 B, stored once.",
    ),
    solution=_tiled_bytes,
    solution_text="tiled_bytes = 256*512*2 * 2 + 512*1024*2 * 2 + 256*1024*2   # 3,145,728 B",
)


def _choice_check(answer):
    from trnlab import kernels

    return choice(
        _first_compute_bound(),
        list(kernels.VARIANTS),
        explain={
            "tiled": "tiled re-loads every tile for every matmul: about 100 FLOP/B, far below the ridge",
            "hoisted": "hoisted still re-loads B for every M tile: about 115 FLOP/B",
            "pipelined": "pipelined is compute-bound, but an earlier kernel already is",
            "blocked_mnk": "blocked_mnk is compute-bound, but an earlier kernel already is",
        },
    )(answer)


first_compute_bound = Exercise(
    "lab03.first_compute_bound",
    "For A[1024 x 2048] @ B[2048 x 2048] in bf16 on trn1, which is the first kernel of the "
    "progression (tiled, hoisted, blocked_mn, blocked_mnk, pipelined) whose roofline bound is "
    "compute (its FLOPs at peak take longer than its HBM bytes at the DMA bandwidth)?",
    _choice_check,
    hints=(
        "Compute-bound means arithmetic intensity above the ridge point (about 337 FLOP/B on trn1).",
        "Intensity is FLOPs over HBM bytes: the variant that stops re-loading A and B wins.",
        "Compare the intensity column of the progression table.",
    ),
    solution=_first_compute_bound,
    solution_text="first_compute_bound = 'blocked_mn'   # 512 FLOP/B: blocks of A and B stay "
    "in SBUF over all of K",
)
