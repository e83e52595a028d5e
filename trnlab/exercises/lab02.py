"""Exercises of lab 02 (inside a NeuronCore). Expected answers come from the core's figures
in the catalogue (``trnlab.core.core_params``)."""

from __future__ import annotations

from ._checks import choice, close_to
from ._exercise import Exercise

__all__ = ["CHIPS", "INTENSITY", "memory_bound_on", "ridge", "sbuf_tiles"]

CHIPS = ("trn1", "trn2", "trn3")
#: The arithmetic intensity of the roofline question (FLOP per HBM byte).
INTENSITY = 250.0


def _params(chip: str):
    from trnlab import core

    return core.core_params(chip)


def _sbuf_tiles() -> int:
    # A bf16 [128 x 512] tile takes 512 x 2 B = 1 KiB of every partition.
    return int(_params("trn1").sbuf_usable_partition_bytes // (512 * 2))


def _ridge() -> float:
    p = _params("trn2")
    # Ridge point of the roofline: peak FLOP/s over bandwidth (Williams et al., 2009).
    return p.peak_flops("bf16") / p.dma_bandwidth


def _memory_bound_on() -> str:
    below = [
        c for c in CHIPS if INTENSITY < _params(c).peak_flops("bf16") / _params(c).dma_bandwidth
    ]
    if len(below) != 1:  # pragma: no cover - the question assumes one answer
        raise RuntimeError(f"the question has {len(below)} answers: {below}")
    return below[0]


def _lazy(make):
    """A check built when first used, so importing the exercises reads no catalogue."""

    def check(answer):
        return make()(answer)

    return check


sbuf_tiles = Exercise(
    "lab02.sbuf_tiles",
    "A NeuronCore-v2 (trn1) leaves 180,224 bytes of each of its 128 SBUF partitions to a "
    "kernel. How many bf16 [128 x 512] tiles (a full moving tile) fit in SBUF at once?",
    _lazy(
        lambda: close_to(
            _sbuf_tiles(),
            rtol=1e-9,
            what="the number of tiles",
            slips={2.0: "a factor of 2 - bf16 is 2 bytes per value"},
        )
    ),
    hints=(
        "A tile takes the same bytes in every partition it uses: count per partition.",
        "512 bf16 values x 2 bytes = 1,024 bytes per partition.",
        "180,224 // 1,024.",
    ),
    solution=_sbuf_tiles,
    solution_text="sbuf_tiles = 180_224 // (512 * 2)   # 176 tiles (22.5 MiB over 128 partitions)",
)

ridge = Exercise(
    "lab02.ridge",
    "One NeuronCore-v3 (trn2) peaks at 128 x 128 x 2 FLOP x 2.4 GHz in bf16 and its DMA moves "
    "368 GB/s between HBM and SBUF. What is the ridge point of its roofline, in FLOP per byte?",
    _lazy(lambda: close_to(_ridge(), rtol=0.01, what="the ridge point", unit="FLOP/B")),
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
    f"A bf16 kernel does {INTENSITY:g} FLOPs per byte it moves between HBM and SBUF. On which "
    f"generation's NeuronCore is it memory-bound: {', '.join(CHIPS)}?",
    _lazy(
        lambda: choice(
            _memory_bound_on(),
            list(CHIPS),
            explain={
                c: f"{c}'s ridge point is below {INTENSITY:g} FLOP/B: the kernel is "
                "compute-bound there"
                for c in CHIPS
            },
        )
    ),
    hints=(
        "Memory-bound means the intensity is below the ridge point.",
        "Compare 250 with each generation's ridge in the table of section 4.",
    ),
    solution=_memory_bound_on,
    solution_text="memory_bound_on = 'trn1'   # ridge 337 FLOP/B; trn2 214, trn3 149",
)
