"""Exercises of lab 02 (inside a NeuronCore). Expected answers come from the core's figures
in the catalogue (``trnlab.core.core_params``) and, for the prediction, from a run of the
pipelined matmul on the NeuronCore model."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from . import _slips as slips
from ._checks import choice, close_to
from ._exercise import Exercise
from ._predict import Prediction

__all__ = [
    "CHIPS",
    "EIGHT_BIT",
    "INTENSITY",
    "MATMUL",
    "TRANSPOSE",
    "matmul_us",
    "memory_bound_on",
    "ridge",
    "sbuf_tiles",
    "transpose_us",
    "transpose_ways",
]

CHIPS = ("trn1", "trn2", "trn3")
#: The arithmetic intensity of the roofline question (FLOP per HBM byte).
INTENSITY = 500.0
#: Each generation's fastest 8-bit Tensor Engine format: plain fp8 runs at the bf16 rate on
#: NeuronCore-v2 (cFP8) and v4 (non-MX input, the NKI architecture guide), at 2x on v3; the
#: v4's 4x needs MXFP8.
EIGHT_BIT = {"trn1": "fp8", "trn2": "fp8", "trn3": "mxfp8"}
#: The tile of the SBUF question: [partitions, free elements] in bf16.
TILE = (128, 2048)
#: The matmul whose time the learner predicts: A[M x K] @ B[K x N], bf16, on trn2.
MATMUL = (2048, 2048, 2048)
#: The K-cache block of section 5: [seq, d_head] bf16 in HBM, wanted as [d_head, seq] in SBUF.
TRANSPOSE = (2048, 128)


def _params(chip: str):
    from trnlab import core

    return core.core_params(chip)


def _physical(chip: str) -> float:
    from trnlab import catalog

    return catalog.chip(chip).core.figure("sbuf_partition_bytes").value


def _sbuf_tiles() -> int:
    # A bf16 [128 x 2048] tile takes 2048 x 2 B = 4 KiB of every partition it spans.
    return int(_params("trn1").sbuf_usable_partition_bytes // (TILE[1] * 2))


def _ridge() -> float:
    p = _params("trn2")
    # Ridge point of the roofline: peak FLOP/s over bandwidth (Williams et al., 2009).
    return p.peak_flops("bf16") / p.dma_bandwidth


def _core_ridge(chip: str) -> float:
    return _params(chip).peak_flops(EIGHT_BIT[chip]) / _params(chip).dma_bandwidth


def _memory_bound_on() -> str:
    below = [c for c in CHIPS if INTENSITY < _core_ridge(c)]
    if len(below) != 1:  # pragma: no cover - the question assumes one answer
        raise RuntimeError(f"the question has {len(below)} answers: {below}")
    return below[0]


def _lazy(make):
    """A check built when first used, so importing the exercises reads no catalogue."""

    def check(answer):
        return make()(answer)

    return check


def _tile_slips() -> tuple[slips.Slip, ...]:
    tiles = _sbuf_tiles()
    per_partition = TILE[1] * 2
    return (
        *slips.usable_vs_physical(
            _physical("trn1") // per_partition, tiles, "SBUF (192 KiB per partition)"
        ),
        *slips.bytes_per_value(0.5, "4 bytes (fp32)", "bf16, 2 bytes each"),
        *slips.bytes_per_value(2.0, "1 byte", "bf16, 2 bytes each"),
        *slips.binary_prefixes(),
        slips.Slip(
            128.0,
            "that divides the whole SBUF by one partition's share of a tile: a tile spans "
            "all 128 partitions, so count per partition",
        ),
        slips.Slip(4.0, "that counts [128 x 512] tiles; the question's tiles are 2048 values wide"),
    )


sbuf_tiles = Exercise(
    "lab02.sbuf_tiles",
    "A NeuronCore-v2 (trn1) leaves 180,224 bytes of each of its 128 SBUF partitions to a "
    f"kernel. How many bf16 [{TILE[0]} x {TILE[1]}] tiles fit in SBUF at once?",
    close_to(_sbuf_tiles, what="the number of tiles", unit="tiles", slips=_tile_slips),
    hints=(
        "A tile takes the same bytes in every partition it uses: count per partition.",
        f"{TILE[1]} bf16 values x 2 bytes = {TILE[1] * 2:,} bytes per partition.",
        f"180,224 // {TILE[1] * 2:,}.",
    ),
    solution=_sbuf_tiles,
    solution_text=f"sbuf_tiles = 180_224 // ({TILE[1]} * 2)   # 44 tiles: 176 KiB usable per "
    "partition (22.0 MiB over 128 partitions, of 24 MiB physical)",
)


def _ridge_slips() -> tuple[slips.Slip, ...]:
    p = _params("trn2")
    r = _ridge()
    return (
        *slips.mac_flops(0.5),
        slips.Slip(
            p.peak_flops("fp8") / p.peak_flops("bf16"),
            "that uses the FP8 peak (twice the BF16 rate on NeuronCore-v3); the question is bf16",
        ),
        slips.Slip(
            p.peak_flops("bf16") / p.hbm_bandwidth / r,
            "that divides by the whole chip's HBM bandwidth; one core is fed by its own DMA "
            "engines (368 GB/s)",
        ),
        slips.Slip(
            1e9, "the bandwidth must be in bytes per second (368e9 B/s), not the number 368"
        ),
        slips.Slip(1e-3, "the peak must be in FLOP/s (about 7.9e13), not TFLOP/s", kind="unit"),
    )


ridge = Exercise(
    "lab02.ridge",
    "One NeuronCore-v3 (trn2) peaks at 128 x 128 x 2 FLOP x 2.4 GHz in bf16 and its DMA moves "
    "368 GB/s between HBM and SBUF. What is the ridge point of its roofline, in FLOP per byte?",
    close_to(_ridge, what="the ridge point", unit="FLOP/B", slips=_ridge_slips),
    hints=(
        "The ridge is where the two roofs meet: peak FLOP/s = intensity x bandwidth.",
        "Peak = 128 * 128 * 2 * 2.4e9 FLOP/s.",
        "Ridge = peak / 368e9.",
    ),
    solution=_ridge,
    solution_text="ridge = 128 * 128 * 2 * 2.4e9 / 368e9   # about 214 FLOP/B",
)

memory_bound_on = Exercise(
    "lab02.memory_bound_on",
    f"A kernel in its core's fastest 8-bit format (fp8 on trn1 and trn2, MXFP8 on trn3) does "
    f"{INTENSITY:g} FLOPs per byte it moves between HBM and SBUF, on one NeuronCore. On which "
    f"generation's core is it memory-bound: {', '.join(CHIPS)}?",
    _lazy(
        lambda: choice(
            _memory_bound_on(),
            list(CHIPS),
            explain={
                c: f"on {c} the kernel is compute-bound: work out {c}'s 8-bit ridge (its "
                f"{EIGHT_BIT[c]} peak over its DMA bandwidth) and compare it with "
                f"{INTENSITY:g} FLOP/B"
                for c in CHIPS
            },
        )
    ),
    hints=(
        "Memory-bound means the intensity is below the ridge point.",
        "Work out each generation's ridge from the table of section 1: the 8-bit peak of a core "
        "over its DMA bandwidth.",
        "An 8-bit format raises the peak (2x with fp8 on NeuronCore-v3, 4x with MXFP8 on v4) but "
        "not the bandwidth.",
    ),
    solution=_memory_bound_on,
    solution_text="memory_bound_on = 'trn3'   # 8-bit ridges: trn1 337 FLOP/B (cFP8 at the bf16 "
    "rate), trn2 427 (fp8), trn3 596 (MXFP8)",
    # trn3's fp8 ridge decides it; the page must not show it before the question.
    giveaways=("596",),
)


@lru_cache(maxsize=1)
def _matmul_run():
    from trnlab import kernels

    m, k, n = MATMUL
    return kernels.matmul((m, k), (k, n), variant="pipelined", chip="trn2", numerics=False)


def _matmul_us() -> float:
    return float(_matmul_run().latency * 1e6)


def _explain_matmul(predicted: float, model: float) -> str:
    r = _matmul_run()
    t = r.program.table
    mm = np.flatnonzero(t["op"] == 2)
    compute = r.compute_bound_s * 1e6
    memory = r.memory_bound_s * 1e6
    fill = r.start[mm[0]] * 1e6
    drain = (r.latency - r.issue_end[mm[-1]]) * 1e6
    gaps = model - compute - fill - drain
    why = (
        f"the kernel does {r.arithmetic_intensity:.0f} FLOP per HBM byte, above the core's ridge "
        f"(about 214), so it is compute-bound: 2MNK FLOPs at the bf16 peak take {compute:.0f} us "
        f"(its bytes at the DMA bandwidth only {memory:.0f} us). The model adds what the "
        f"roofline leaves out: {fill:.1f} us before the first matmul (the first blocks of A and "
        f"B must arrive), {gaps:.1f} us of waits where one block hands over to the next, and "
        f"{drain:.1f} us after the last matmul (the last sums are added and stored): "
        f"{r.utilisation:.0%} of peak."
    )
    if abs(predicted / memory - 1) < 0.3:
        why += (
            " A figure near the memory bound takes the smaller roof; the time is at least the "
            "larger of the two."
        )
    elif predicted < 0.7 * memory:
        why += " No kernel beats the roofline: its bounds are floors, not estimates."
    return why


matmul_us = Prediction(
    "lab02.matmul_us",
    f"Predict before the next cell runs it: how long does one NeuronCore-v3 (trn2) take for "
    f"the bf16 matmul A[{MATMUL[0]} x {MATMUL[1]}] @ B[{MATMUL[1]} x {MATMUL[2]}] with the "
    "pipelined kernel, which reads A about twice and B once? Answer in microseconds, for the "
    "kernel body (without the launch overhead).",
    _matmul_us,
    what="the time",
    unit="us",
    explain=_explain_matmul,
    within=0.25,
    hints=(
        "The roofline: time >= max(FLOPs / peak, bytes / bandwidth); a matmul does 2MNK FLOPs.",
        "Peak (bf16, one core) = 78.6 TFLOP/s; DMA = 368 GB/s. Which bound is larger?",
    ),
    solution_text="t_us = 2 * 2048 * 2048 * 2048 / 78.6e12 * 1e6   # 219 us if compute-bound; "
    "the model gives about 233 us (pipeline fill, block hand-overs and drain)",
)


# ----------------------------------------------------------------------------------------------
# Section 5: moving values across partitions
# ----------------------------------------------------------------------------------------------
def _transpose_stream_us() -> float:
    # The Trainium2 guide: a DMA transpose from HBM reaches up to 90% of a copy's throughput.
    p = _params("trn2")
    seq, d = TRANSPOSE
    return seq * d * 2 / (p.dma_transpose_hbm_share * p.dma_bandwidth) * 1e6


def _transpose_slips() -> tuple[slips.Slip, ...]:
    return (
        slips.Slip(
            0.9, "that is a plain copy's time at 368 GB/s; the transpose streams at 90% of it"
        ),
        slips.Slip(
            0.81, "that multiplies by 0.9; a stream at 90% of the rate takes longer, not less"
        ),
        slips.Slip(1 / 0.9, "that divides by 0.9 twice: the rate is 0.9 x 368 GB/s, once"),
        slips.Slip(
            1.8,
            "that streams at 50% (the guide's SBUF-to-SBUF figure), or counts fp32 bytes "
            "without the 90%: this block is bf16 (2 bytes a value) coming from HBM (90%)",
        ),
        *slips.bytes_per_value(2.0, "4 bytes (fp32)", "bf16, 2 bytes each"),
        slips.Slip(0.5, "that counts values, not bytes: each bf16 value is 2 bytes"),
        slips.Slip(368 / 272, "that is trn1's 272 GB/s; the question's core is trn2's (368 GB/s)"),
        *slips.binary_prefixes(),
        slips.Slip(1e-6, "the answer is in microseconds, not seconds", kind="unit"),
    )


def _transpose_known() -> dict[float, str]:
    whole = {w["way"]: w["latency_us"] for w in transpose_ways()}["trn2, DMA transpose"]
    why = (
        "that is the whole DMA transpose as the model times it, its set-up and completion "
        "included; the question asks for the streaming alone"
    )
    return {round(whole, 2): why, round(whole, 1): why}  # as computed, and as the chart shows


transpose_us = Exercise(
    "lab02.transpose_us",
    f"A decode step's K cache block is [{TRANSPOSE[0]} x {TRANSPOSE[1]}] bf16 in HBM "
    f"([sequence, head dimension]); Q K^T needs it as [{TRANSPOSE[1]} x {TRANSPOSE[0]}] in SBUF, "
    "the head dimension on the partitions. The Trainium2 guide says a DMA transpose from HBM "
    "reaches up to 90% of a copy's throughput, and one NeuronCore-v3 (trn2) copies 368 GB/s "
    "from HBM into SBUF. How many microseconds does the DMA transpose of this block spend "
    "streaming, at 90% of 368 GB/s? (Leave out the transfer's set-up and completion; three "
    "significant figures.)",
    close_to(
        _transpose_stream_us,
        what="the streaming time",
        unit="us",
        slips=_transpose_slips,
        known=_transpose_known,
    ),
    hints=(
        "Bytes first: rows x columns x 2 bytes for bf16.",
        "At 90% of 368 GB/s the DMA moves 0.9 * 368e9 bytes per second.",
        "Time = bytes / (0.9 * 368e9) seconds; multiply by 1e6 for microseconds.",
    ),
    solution=_transpose_stream_us,
    solution_text="transpose_us = 2048 * 128 * 2 / (0.9 * 368e9) * 1e6   # about 1.58 us",
    giveaways=("1.58",),
)


def _k_block_by_tensor_engine(ctx, k, queues: int = 1, psum_buffers: int = 1):
    """Per 128 rows of k: a load, a transpose into PSUM, a copy into the [d, seq] tile. The
    loads go over ``queues`` DMA queues (1: the queue all loads of a tensor share in the
    model), the transposes into ``psum_buffers`` PSUM tiles in turn."""
    seq, d = k.shape
    out = ctx.sbuf((d, seq), "bf16", "k_t")
    banks = [ctx.psum((d, 128), f"ps{b}") for b in range(psum_buffers)]
    for j in range(seq // 128):
        block = ctx.sbuf((128, d), "bf16", f"block{j}")
        ctx.load(block, k[j * 128 : (j + 1) * 128, :], queue=j % queues if queues > 1 else None)
        ps = banks[j % psum_buffers]
        ctx.transpose(ps, block)
        ctx.copy(out[:, j * 128 : (j + 1) * 128], ps)


def _k_block_spread(ctx, k):
    """The Tensor Engine path with its loads over 15 queues and 4 PSUM tiles in turn."""
    _k_block_by_tensor_engine(ctx, k, queues=15, psum_buffers=4)


def _k_block_by_dma(ctx, k):
    """One DMA transpose of the whole block (NeuronCore-v3 and later)."""
    seq, d = k.shape
    ctx.dma_transpose(ctx.sbuf((d, seq), "bf16", "k_t"), k)


def _k_block_plain(ctx, k):
    """The block's bytes loaded as they lie (rows 16p..16p+15 on partition p), not transposed:
    what moving them costs without any transpose."""
    seq, d = k.shape
    ctx.load(ctx.sbuf((128, seq * d // 128), "bf16", "k"), k, flat=True)


#: (label, chip, kernel) of the section-5 comparison
_TRANSPOSE_WAYS = (
    ("trn1, Tensor Engine", "trn1", _k_block_by_tensor_engine),
    ("trn2, Tensor Engine", "trn2", _k_block_by_tensor_engine),
    ("trn2, Tensor Engine, 15 queues", "trn2", _k_block_spread),
    ("trn2, DMA transpose", "trn2", _k_block_by_dma),
    ("trn2, plain load (no transpose)", "trn2", _k_block_plain),
)


@lru_cache(maxsize=4)
def transpose_ways(shape: tuple[int, int] = TRANSPOSE) -> tuple[dict, ...]:
    """The [seq, d] bf16 block of HBM moved into SBUF as [d, seq], each way of section 5 (timing
    only): its label, chip, latency (us), the engines' busy shares, and the number of
    instructions."""
    from trnlab import core

    seq, d = (int(x) for x in shape)
    if seq % 128 or not 1 <= d <= 128:
        raise ValueError(
            f"the block is [seq, d] with seq a multiple of 128 (the Tensor Engine path moves "
            f"128 rows at a time) and d at most 128 (it lands on the partitions); got {shape}"
        )
    rows = []
    for label, chip, kernel in _TRANSPOSE_WAYS:
        run = core.run(
            kernel, chip=chip, numerics=False, k=core.hbm((seq, d), "bf16", is_input=True)
        )
        rows.append(
            {
                "way": label,
                "chip": chip,
                "latency_us": run.latency * 1e6,
                "busy": dict(run.busy),
                "instructions": len(run.program),
            }
        )
    return tuple(rows)
