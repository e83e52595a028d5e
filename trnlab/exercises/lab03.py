"""Exercises of lab 03 (the tiled matmul). Expected answers come from runs of the reference
kernels on the NeuronCore model (timing only), computed on first use.

The reload and bytes exercises have a variant per matmul shape (``VARIANTS``: the lab's ``M``,
``K`` and ``N``, the matmul its stepper walks through); the lab's setup cell calls :func:`setup`.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ._checks import choice, close_to
from ._exercise import Exercise
from ._variants import check_variant

__all__ = [
    "DEFAULTS",
    "SHAPE",
    "VARIANTS",
    "first_compute_bound",
    "matmul_ns",
    "reloads",
    "setup",
    "tiled_bytes",
]

#: Variant space of the exercises: lab parameter -> allowed values (see :func:`setup`).
#: Whole tiles only (M a multiple of 128, K of 128, N of 512), small enough to step through.
VARIANTS = {"M": [128, 256, 384, 512], "K": [256, 512, 768, 1024], "N": [1024, 1536, 2048]}
#: The values the committed lab uses.
DEFAULTS = {"M": 256, "K": 512, "N": 1024}
#: The shape the questions are about (bf16, on trn1): A[M x K] @ B[K x N]; see :func:`setup`.
SHAPE = (DEFAULTS["M"], DEFAULTS["K"], DEFAULTS["N"])
#: The larger shape of the progression question.
BIG = (1024, 2048, 2048)


@lru_cache(maxsize=8)
def _run(variant: str, m: int, k: int, n: int, chip: str = "trn1"):
    from trnlab import kernels

    return kernels.matmul((m, k), (k, n), variant=variant, chip=chip, numerics=False)


def _reloads(m: int, k: int, n: int) -> float:
    """Loads of each A tile: loads reading a_t over the distinct a_t regions they read."""
    r = _run("tiled", m, k, n)
    t = r.program.table
    a = next(x.id for x in r.program.tensors if x.name == "a_t")
    sel = (t["op"] == 0) & (t["hbm"] == a)
    regions = {tuple(int(v) for v in reg) for reg in t["hbm_region"][sel]}
    return int(sel.sum()) / len(regions)


def _matmul_ns() -> float:
    """How long one full bf16 matmul keeps the Tensor Engine when matmuls run back to back: the
    issue interval of a matmul in the middle of the tiled run (its stationary tile was loaded in
    the background while the previous matmul streamed)."""
    r = _run("tiled", DEFAULTS["M"], DEFAULTS["K"], DEFAULTS["N"])
    mm = np.flatnonzero(r.program.table["op"] == 2)
    i = mm[len(mm) // 2]
    return float((r.issue_end[i] - r.start[i]) * 1e9)


def _tiled_bytes(m: int, k: int, n: int) -> float:
    return float(_run("tiled", m, k, n).hbm_bytes)


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


def _reloads_exercise(m: int, k: int, n: int) -> Exercise:
    per_n = n // 512
    return Exercise(
        "lab03.reloads",
        f"The tiled kernel computes C = A @ B for A[{m} x {k}] and B[{k} x {n}] in tiles of "
        "128 (K) x 128 (M) x 512 (N), loading an A tile and a B tile for every matmul. How many "
        "times is each 128 x 128 tile of A loaded from HBM?",
        _close(
            lambda: _reloads(m, k, n),
            rtol=1e-9,
            what="the number of loads",
            slips={
                float(per_n): f"a factor of {per_n} - an A tile is loaded again for every N tile"
            },
        ),
        hints=(
            "The loops are: for each M tile, for each N tile, for each K tile: load, load, matmul.",
            "An A tile (one M tile, one K tile) is needed once for every N tile.",
            f"N / 512 = {n} / 512.",
        ),
        solution=lambda: _reloads(m, k, n),
        solution_text=f"reloads = {n} // 512   # {per_n}: once per N tile; hoisting the loads "
        "out of the N loop makes it 1",
    )


def _times(count: int) -> str:
    return "time" if count == 1 else "times"


def _tiled_bytes_exercise(m: int, k: int, n: int) -> Exercise:
    a_loads, b_loads = n // 512, m // 128
    total = m * k * 2 * a_loads + k * n * 2 * b_loads + m * n * 2
    return Exercise(
        "lab03.tiled_bytes",
        f"How many bytes does the tiled kernel move between HBM and SBUF for A[{m} x {k}] @ "
        f"B[{k} x {n}] in bf16 (2 bytes per value), C stored once in bf16?",
        _close(lambda: _tiled_bytes(m, k, n), rtol=0.001, what="the bytes moved", unit="B"),
        hints=(
            "Three parts: A as often as it is re-loaded, B likewise, C once.",
            f"A ({m} x {k} x 2 B) is loaded N / 512 = {a_loads} {_times(a_loads)}; "
            f"B ({k} x {n} x 2 B) M / 128 = {b_loads} {_times(b_loads)}.",
            f"C is {m} x {n} x 2 B, stored once.",
        ),
        solution=lambda: _tiled_bytes(m, k, n),
        solution_text=f"tiled_bytes = {m}*{k}*2 * {a_loads} + {k}*{n}*2 * {b_loads} + "
        f"{m}*{n}*2   # {total:,} B",
    )


def setup(*, m: int = DEFAULTS["M"], k: int = DEFAULTS["K"], n: int = DEFAULTS["N"]) -> dict:
    """Rebuild the variant-aware exercises for this copy of the lab (its setup cell calls it).

    Parameters
    ----------
    m, k, n : int
        The matmul A[m x k] @ B[k x n] that :data:`reloads` and :data:`tiled_bytes` ask about,
        each one of ``VARIANTS["M"]``, ``VARIANTS["K"]``, ``VARIANTS["N"]``.

    Returns
    -------
    dict
        The variant in force, by lab parameter name.
    """
    global SHAPE, reloads, tiled_bytes
    shape = tuple(
        check_variant("lab03", name, value, VARIANTS)
        for name, value in (("M", m), ("K", k), ("N", n))
    )
    SHAPE = shape
    reloads = _reloads_exercise(*shape)
    tiled_bytes = _tiled_bytes_exercise(*shape)
    return dict(zip(("M", "K", "N"), shape, strict=True))


reloads = _reloads_exercise(*SHAPE)


matmul_ns = Exercise(
    "lab03.matmul_ns",
    "On trn1 (Tensor Engine clock 2.8 GHz) a matmul streams its moving tile in max(N, 64) "
    "cycles; the next stationary tile is loaded in the background meanwhile (4x faster than "
    "streaming, so it hides). When matmuls run back to back, how many nanoseconds does one bf16 "
    "matmul of a [128 x 128] stationary tile by a [128 x 512] moving tile keep the Tensor "
    "Engine busy?",
    _close(
        _matmul_ns,
        rtol=0.01,
        what="the time",
        unit="ns",
        slips={
            (512 + 32) / 2.8: "the stationary load (32 cycles) hides behind the previous "
            "matmul's streaming: count only the max(N, 64) cycles",
            (512 + 485) / 2.8: "that is the time until the result is in PSUM (the pipeline's "
            "latency added); the engine can start the next matmul before that",
        },
    ),
    hints=(
        "The moving tile has N = 512 columns: max(512, 64) = 512 cycles.",
        "The stationary tile of the next matmul loads while this one streams, so it adds "
        "nothing when matmuls run back to back.",
        "512 cycles / 2.8e9 cycles per second, in ns.",
    ),
    solution=_matmul_ns,
    solution_text="matmul_ns = 512 / 2.8e9 * 1e9   # 182.9 ns: the stationary load hides",
)

tiled_bytes = _tiled_bytes_exercise(*SHAPE)


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
