"""Exercises of lab 03 (the tiled matmul). Expected answers come from runs of the reference
kernels on the NeuronCore model (timing only), computed on first use.

The reload and bytes exercises have a variant per matmul shape (``VARIANTS``: the lab's ``M``,
``K`` and ``N``, the matmul its stepper walks through); the lab's setup cell calls :func:`setup`.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from . import _slips as slips
from ._checks import choice, close_to
from ._exercise import Exercise
from ._predict import Prediction
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
    "tiled_us",
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


#: The moving tile's free size in the matmul-time question: not the full 512, whose time lab 02
#: prints, so the answer must be worked out.
MOVING_N = 256


@lru_cache(maxsize=1)
def _narrow_run():
    from trnlab import kernels

    m, k, n = DEFAULTS["M"], DEFAULTS["K"], DEFAULTS["N"]
    return kernels.matmul(
        (m, k), (k, n), variant="tiled", chip="trn1", numerics=False, tile_n=MOVING_N
    )


def _matmul_ns() -> float:
    """How long one bf16 matmul with a [128 x MOVING_N] moving tile keeps the Tensor Engine when
    matmuls run back to back: the issue interval of a matmul in the middle of a tiled run with
    that tile (its stationary tile was loaded in the background while the previous matmul
    streamed)."""
    r = _narrow_run()
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


def _reloads_exercise(m: int, k: int, n: int) -> Exercise:
    per_n = n // 512
    found = [
        slips.Slip(
            1 / per_n,
            "that is how often it would be loaded with the loads hoisted out of the N loop; "
            "the tiled kernel loads an A tile again for every N tile",
        ),
        slips.Slip(
            (m // 128) * (k // 128) * per_n / per_n,
            "that is how many A-tile loads the whole kernel makes; the question asks how often "
            "each tile is loaded",
        ),
    ]
    if k // 128 != per_n:
        found.append(
            slips.Slip(
                (k // 128) / per_n,
                "that counts the K tiles; one A tile has one K index, and is reused across N",
            )
        )
    return Exercise(
        "lab03.reloads",
        f"The tiled kernel computes C = A @ B for A[{m} x {k}] and B[{k} x {n}] in tiles of "
        "128 (K) x 128 (M) x 512 (N), loading an A tile and a B tile for every matmul. How many "
        "times is each 128 x 128 tile of A loaded from HBM?",
        close_to(
            lambda: _reloads(m, k, n),
            what="the number of loads",
            unit="loads",
            slips=tuple(found),
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
    minimum = 2 * (m * k + k * n + m * n)
    found = (
        *slips.si_prefixes("B", hi=9),
        *slips.binary_prefixes("B"),
        *slips.bytes_per_value(2.0, "4 bytes (fp32)", "bf16, 2 bytes each"),
        *slips.bytes_per_value(0.5, "1 byte", "bf16, 2 bytes each"),
        slips.Slip(
            minimum / total,
            "that is the minimum (A, B and C once each); the tiled kernel re-loads A for every "
            "N tile and B for every M tile",
        ),
        slips.Slip((total - m * n * 2) / total, "that leaves out C, which is stored once", 0.005),
    )
    return Exercise(
        "lab03.tiled_bytes",
        f"How many bytes does the tiled kernel move between HBM and SBUF for A[{m} x {k}] @ "
        f"B[{k} x {n}] in bf16 (2 bytes per value), C stored once in bf16?",
        close_to(lambda: _tiled_bytes(m, k, n), what="the number of bytes", unit="B", slips=found),
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


def _tiled_us(m: int, k: int, n: int) -> float:
    return float(_run("tiled", m, k, n).latency * 1e6)


def _tiled_explainer(m: int, k: int, n: int):
    def explain(predicted: float, model: float) -> str:
        from trnlab import core

        r = _run("tiled", m, k, n)
        t = r.program.table
        mm = np.flatnonzero(t["op"] == 2)
        interval = core.core_params("trn1").values["dma_queue_interval"] * 1e6
        compute, memory = r.compute_bound_s * 1e6, r.memory_bound_s * 1e6
        cadence = float(np.median(np.diff(r.start[mm]))) * 1e6 if len(mm) > 1 else 0.0
        rate = core.core_params("trn1").dma_static_queue_bandwidth / 1e9
        why = (
            f"each of the {len(mm)} matmuls keeps the Tensor Engine only "
            f"{(r.issue_end[mm[0]] - r.start[mm[0]]) * 1e9:.0f} ns ({compute:.1f} us in all), "
            f"but waits for its own A and B tiles, and on trn1 every load goes through one DMA "
            f"queue, which sets up one transfer at a time (about {interval:.2f} us each) and "
            f"streams at most {rate:.0f} GB/s: the matmuls come {cadence:.1f} us apart, and "
            f"filling and draining the pipeline adds the rest. The roofline's memory bound, "
            f"{memory:.1f} us (every byte at the 16 DMA engines' bandwidth), leaves the one "
            f"queue out."
        )
        launch = r.params.launch_overhead * 1e6
        # Each matmul's two set-ups and its bytes added in series, as if the queue did not
        # set up the next transfer while the current one streams.
        loaded = sum(t["loaded"] for t in core.hbm_traffic(r).values())
        tile_bytes = loaded / len(mm)  # an A tile and a B tile per matmul
        serial = len(mm) * (2 * interval + tile_bytes / (rate * 1e3))
        if abs(predicted - serial) < 0.1 * serial and abs(predicted - serial) <= abs(
            predicted - (model + launch)
        ):
            why += (
                f" Your figure looks like every transfer's set-up added to its streaming "
                f"({len(mm)} x (2 x {interval:.2f} + {tile_bytes / (rate * 1e3):.2f}) us): the "
                "queue sets up the next transfer while the current one streams, so the larger "
                "of the two sets the pace."
            )
        elif abs(predicted - (model + launch)) < 0.1 * model:
            why += (
                f" Your figure looks like the kernel body plus the {launch:.0f} us launch "
                "overhead (the runtime's pre- and post-amble); the question asks for the body."
            )
        elif predicted < 1.5 * compute:
            why += " A figure near the compute time counts the matmuls but not the loads they wait for."
        elif abs(predicted / memory - 1) < 0.3:
            why += " A figure near the memory bound assumes the DMA streams at full bandwidth."
        elif predicted > 1.3 * model:
            bufs = int(r.params.compiler_rotating_buffers)
            why += (
                f" The next pair of loads overlaps the current matmul ({bufs} rotating buffers "
                "per tile), so loads and matmuls do not add up."
            )
        return why

    return explain


def _tiled_us_exercise(m: int, k: int, n: int) -> Prediction:
    return Prediction(
        "lab03.tiled_us",
        f"Predict before the stepper runs it: how long does the tiled kernel take on trn1 for "
        f"A[{m} x {k}] @ B[{k} x {n}] in bf16, in microseconds (the kernel body: leave out the "
        "launch overhead the runtime adds around every kernel)? Each matmul streams for about "
        "0.18 us; each loads a 32 KiB A tile and a 128 KiB B tile, all on one DMA queue (as the "
        "model takes an NKI kernel to load on trn1), which sets up one transfer at a time (0.84 "
        "us each in the model, a trn2 figure; the next while the current one streams) and "
        "streams at most 102 GB/s.",
        lambda: _tiled_us(m, k, n),
        what="the time",
        unit="us",
        explain=_tiled_explainer(m, k, n),
        within=0.3,
        hints=(
            "Count the matmuls: (M/128) x (N/512) x (K/128); each needs an A and a B tile.",
            "Compare the matmuls' time with what the one load queue must do: two set-ups per "
            "matmul (0.84 us each), and the bytes at 102 GB/s. The larger sets the pace.",
        ),
        solution_text=f"{(m // 128) * (n // 512) * (k // 128)} matmuls, each waiting for its A "
        "and B transfers on the one load queue (2 x 0.84 us of set-up, about as long as their "
        "160 KiB at 102 GB/s), plus the pipeline filling and draining: the model's time is what "
        "the stepper shows",
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
    global SHAPE, reloads, tiled_bytes, tiled_us
    shape = tuple(
        check_variant("lab03", name, value, VARIANTS)
        for name, value in (("M", m), ("K", k), ("N", n))
    )
    SHAPE = shape
    reloads = _reloads_exercise(*shape)
    tiled_bytes = _tiled_bytes_exercise(*shape)
    tiled_us = _tiled_us_exercise(*shape)
    return dict(zip(("M", "K", "N"), shape, strict=True))


reloads = _reloads_exercise(*SHAPE)
tiled_us = _tiled_us_exercise(*SHAPE)


matmul_ns = Exercise(
    "lab03.matmul_ns",
    "On trn1 (Tensor Engine clock 2.8 GHz) a matmul streams its moving tile in max(N, 64) "
    "cycles; the next stationary tile is loaded in the background meanwhile (up to 4x faster than "
    "streaming, so it hides). When matmuls run back to back, how many nanoseconds does one bf16 "
    f"matmul of a [128 x 128] stationary tile by a [128 x {MOVING_N}] moving tile keep the "
    "Tensor Engine busy?",
    close_to(
        _matmul_ns,
        what="the time",
        unit="ns",
        slips=lambda: (
            *slips.si_prefixes("ns", hi=9),
            slips.Slip(
                (MOVING_N + 128 / 4) / MOVING_N,
                "that adds the stationary load (128 rows at 4x the streaming rate: 32 cycles in "
                "trnlab's model), which hides behind the previous matmul's streaming: count "
                "only the max(N, 64) cycles",
                0.01,
            ),
            slips.Slip(
                (MOVING_N + 485) / MOVING_N,
                "that is the time until the result is in PSUM (the pipeline's measured "
                "latency added); the engine can start the next matmul before that",
                0.01,
            ),
            slips.Slip(
                2.8 / 2.4, "that uses trn2's 2.4 GHz clock; the question is trn1 (2.8 GHz)", 0.01
            ),
            slips.Slip(
                512 / MOVING_N,
                f"that is the time of a full 512-column moving tile (lab 02's table); this one "
                f"has N = {MOVING_N} columns",
                0.01,
            ),
            slips.Slip(
                64 / MOVING_N,
                f"a matmul streams max(N, 64) cycles: N = {MOVING_N} here, not 64",
                0.01,
            ),
            slips.Slip(
                128 / MOVING_N,
                f"the moving tile has N = {MOVING_N} columns, so {MOVING_N} cycles, not 128",
                0.01,
            ),
        ),
    ),
    hints=(
        f"The moving tile has N = {MOVING_N} columns: max({MOVING_N}, 64) = {MOVING_N} cycles.",
        "The stationary tile of the next matmul loads while this one streams, so it adds "
        "nothing when matmuls run back to back.",
        f"{MOVING_N} cycles / 2.8e9 cycles per second, in ns.",
    ),
    solution=_matmul_ns,
    solution_text=f"matmul_ns = {MOVING_N} / 2.8e9 * 1e9   # {MOVING_N / 2.8:.1f} ns: the "
    "stationary load hides",
)

tiled_bytes = _tiled_bytes_exercise(*SHAPE)


def _choice_check(answer):
    from trnlab import kernels

    return choice(
        _first_compute_bound(),
        list(kernels.VARIANTS),
        explain={
            "tiled": "tiled re-loads every tile for every matmul: work out its FLOPs per byte "
            "and compare them with trn1's ridge",
            "hoisted": "hoisted stops re-loading A but still re-loads B for every M tile: count "
            "its bytes and compare its FLOPs per byte with the ridge",
            "blocked_mn": "blocked_mn loads each B tile once per pair of M tiles, so B is still "
            "read M/256 times: its FLOPs per byte fall short of the ridge",
            "pipelined": "pipelined is compute-bound, but the question asks for the first such "
            "kernel: check the ones before it in the progression",
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
        "Intensity = 2MNK FLOPs / bytes moved; bytes = 2 x (A's values x times A is loaded "
        "+ B's values x times B is loaded + C's values).",
        "tiled loads A N/512 times and B M/128 times; hoisted A once, B M/128 times; blocked_mn "
        "A once, B M/256 times; blocked_mnk A N/1024 times, B once.",
    ),
    solution=_first_compute_bound,
    solution_text="first_compute_bound = 'blocked_mnk'   # 410 FLOP/B: A read twice, B once; "
    "blocked_mn still reads B M/256 = 4 times (205 FLOP/B, below the ridge of 337)",
    # The intensity column of the progression table decides it, and the paragraph that reads the
    # table names the kernel: both come after the question.
    giveaways=("410", "the Tensor Engine, not the DMA"),
)
