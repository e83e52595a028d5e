"""Exercises of lab 09 (scaling to UltraServers). Expected answers come from trnlab.scale."""

from __future__ import annotations

import math

from trnlab import catalog, scale

from . import _slips as slips
from ._checks import close_to
from ._exercise import Exercise
from ._predict import Prediction

__all__ = ["adam_bytes", "bubble", "eager_loss_ms", "min_chips", "zero3_memory"]


def _state_bytes_per_param() -> float:
    m = scale.model("llama3-8b")
    mem = scale.training_memory(m, recompute=True)  # no sharding: every chip holds everything
    return (mem.weights + mem.gradients + mem.optimizer) / m.params


adam_bytes = Exercise(
    "lab09.adam_bytes",
    "Mixed-precision Adam keeps BF16 weights, BF16 gradients, and FP32 master weights, momentum "
    "and variance. How many bytes per parameter is that?",
    close_to(
        _state_bytes_per_param,
        what="bytes per parameter",
        unit="bytes per parameter",
        slips=(
            slips.Slip(
                12 / 16,
                "that is the FP32 optimizer state alone; add the BF16 weights "
                "and gradients (2 + 2 bytes)",
            ),
            slips.Slip(
                8 / 16,
                "that counts 2 bytes for every copy; the master weights, "
                "momentum and variance are FP32 (4 bytes each)",
            ),
            slips.Slip(
                18 / 16,
                "that keeps the gradients in FP32, as Megatron-LM does: the question's "
                "gradients are BF16",
            ),
            slips.Slip(
                20 / 16,
                "that counts all five copies in FP32; weights and gradients are BF16 (2 bytes)",
            ),
            slips.Slip(8.0, "that is bits; the question asks for bytes", kind="unit"),
        ),
    ),
    hints=("BF16 is 2 bytes, FP32 is 4.", "2 + 2 + 3 x 4"),
    solution=lambda: 2 + 2 + 3 * 4,
    solution_text="bytes = 2 + 2 + 4 + 4 + 4   # 16: the ZeRO paper's 2 + 2 + K with K = 12",
)


def _min_chips() -> int:
    m = scale.model("llama3-70b")
    usable = catalog.chip("trn2").hbm_bytes * scale._plan.USABLE_HBM
    return math.ceil(16 * m.params / usable)


def _min_chips_known() -> dict[float, str]:
    state = 16 * scale.model("llama3-70b").params
    usable = catalog.chip("trn2").hbm_bytes * scale._plan.USABLE_HBM
    found: dict[float, list[str]] = {}
    for count, says in (
        (state / usable, "that is the quotient; a fraction of a chip does not exist: round up"),
        (_min_chips() - 1, "that rounds down, and the state would not fit: round up"),
        (math.ceil(state / (96 * 2**30)), "that counts all 96 GiB; only 95% is usable"),
        (math.ceil(state / (0.95 * 96e9)), "that reads 96 GiB as 96 x 10^9 bytes; a GiB is 2^30"),
    ):
        found.setdefault(float(count), []).append(says)
    return {k: "; or ".join(v) for k, v in found.items() if k != _min_chips()}


min_chips = Exercise(
    "lab09.min_chips",
    "Ignoring activations, what is the smallest number of Trainium2 chips whose HBM (96 GiB each, "
    "95% usable) can hold Llama 3 70B's training state (70.55B parameters, each with the bytes "
    "of exercise 1) when ZeRO-3 shards all of it?",
    close_to(
        _min_chips,
        what="the chip count",
        unit="chips",
        known=_min_chips_known,
        slips=(
            slips.Slip(
                1 / 8,
                "that counts 2 bytes per parameter (the BF16 weights "
                "alone); the training state is 16 bytes per parameter",
            ),
        ),
    ),
    hints=(
        "Total state = 16 x 70.55e9 bytes; one chip holds 0.95 x 96 x 2^30 bytes.",
        "Divide and round up: a fraction of a chip does not exist.",
    ),
    solution=_min_chips,
    solution_text="math.ceil(16 * 70.55e9 / (0.95 * 96 * 2**30))   # 12: the state alone; activations need more",
)

bubble = Exercise(
    "lab09.bubble",
    "A 1F1B pipeline has 4 stages and runs 16 micro-batches per step. What fraction of the step "
    "are the stages idle (the pipeline bubble)?",
    close_to(
        (4 - 1) / (16 + 4 - 1),
        what="the bubble fraction",
        slips=(
            *slips.fraction_vs_percent("fraction"),
            slips.Slip(
                (4 - 1) / 16 / ((4 - 1) / (16 + 4 - 1)),
                "that is (p-1)/m, the bubble measured against the ideal (bubble-free) time, "
                "the other convention in the literature; the question asks for its share of "
                "the step, (p-1)/(m+p-1)",
                0.005,
            ),
            slips.Slip(
                4 / (16 + 4) / ((4 - 1) / (16 + 4 - 1)),
                "that is p/(m+p); the pipeline fills in p - 1 slots and drains in p - 1: "
                "(p-1)/(m+p-1)",
                0.005,
            ),
        ),
    ),
    hints=(
        "The step takes m + p - 1 micro-batch slots for m micro-batches.",
        "Idle share = (p - 1) / (m + p - 1).",
    ),
    solution=lambda: (4 - 1) / (16 + 4 - 1),
    solution_text="bubble = (4 - 1) / (16 + 4 - 1)   # 0.158: more micro-batches shrink it",
)


SEQ_LEN = 4096


def _zero3_memory_gib() -> float:
    m = scale.model("llama3-70b")
    return scale.training_memory(m, seq_len=SEQ_LEN, dp=64, zero=3).total / 2**30


def _explain_zero3(predicted: float, model: float) -> str:
    m = scale.model("llama3-70b")
    r = scale.training_memory(m, seq_len=SEQ_LEN, dp=64, zero=3)
    gib = 2**30
    state = (r.weights + r.gradients + r.optimizer) / gib
    why = (
        f"ZeRO-3 shards the 16 bytes per parameter over 64 chips: {state:.1f} GiB. The rest is "
        f"what every chip keeps for itself: the activations of its own {SEQ_LEN}-token sequence "
        f"for the backward pass, about 34 bytes per token per hidden unit in each of the "
        f"{m.layers} layers ({r.activations / gib:.0f} GiB), the gathered weights of the layers "
        f"in flight ({r.buffers / gib:.1f} GiB) and the logits ({r.logits / gib:.1f} GiB). "
        "Sharding divides the state, not the activations: that is what recomputation is for."
    )
    if predicted < 0.5 * model:
        why += " A figure near the sharded state leaves the activations out."
    return why


zero3_memory = Prediction(
    "lab09.zero3_memory",
    "Predict before the chart: Llama 3 70B (70.55B parameters, 80 layers, hidden 8,192) trained "
    "on 64 chips, data-parallel with ZeRO-3 (all of exercise 1's state sharded), one "
    "4,096-token sequence per chip, FlashAttention, no recomputation. How much memory does each "
    "chip need, in GiB?",
    _zero3_memory_gib,
    what="the memory per chip",
    unit="GiB",
    explain=_explain_zero3,
    within=0.25,
    slips=(*slips.binary_prefixes("GiB"), *slips.si_prefixes("GiB", hi=9)),
    hints=(
        "Start from the state: 16 bytes x 70.55e9 parameters over 64 chips.",
        "Then the activations kept for the backward pass: per layer, about 34 bytes per token "
        "per hidden unit (Korthikanti et al.), for 4,096 tokens and 80 layers.",
    ),
    solution_text="state 16 * 70.55e9 / 64 / 2**30 = 16.4 GiB; activations 34 * 4096 * 8192 * "
    "80 / 2**30 = 85 GiB; plus gathered weights and logits",
)


#: Megatron-Core's 1.7B run on H100 (docs/validation.md): one GPU per model copy, 48 copies,
#: 192 sequences of 4,096 tokens per step.
MCORE_SMALL = "megatron-core 1.7b H100"


def _eager_loss_ms() -> float:
    from trnlab.scale._memory_bound import loss_bytes_per_token, stream_bandwidth
    from trnlab.scale._published import TRAINING_CASES

    case = next(c for c in TRAINING_CASES if c.key == MCORE_SMALL)
    tokens = case.global_batch // case.parallel.dp * case.seq_len  # per GPU per step
    per_token = loss_bytes_per_token(case.model, case.parallel.tp, fused=False)
    return tokens * per_token / stream_bandwidth(catalog.chip("h100")) * 1e3


eager_loss_ms = Exercise(
    "lab09.eager_loss_ms",
    "Megatron-LM's unfused cross-entropy runs a PyTorch kernel per step of the softmax over "
    "FP32 logits and moves 52 bytes per logit in all, forward and backward together (a fused "
    "kernel moves 12). "
    "In Megatron-Core's 1.7B run each H100 trains 4 sequences of 4,096 tokens per step and "
    "holds the whole 131,072-word vocabulary (no tensor parallelism). At the 1,643 GB/s "
    "PyTorch's kernels stream on an H100, how many milliseconds of each step does the loss "
    "take?",
    close_to(
        _eager_loss_ms,
        what="the loss's time per step",
        unit="ms",
        slips=(
            slips.Slip(
                12 / 52, "that is a fused kernel's 12 bytes per logit; the eager loss moves 52"
            ),
            slips.Slip(
                1.643 / 3.35,
                "that streams at the H100's HBM roofline (3.35 TB/s); "
                "PyTorch's kernels reach 1,643 GB/s",
            ),
            slips.Slip(1 / 4, "that is one sequence; each GPU trains 4 per step"),
            slips.Slip(
                2.0,
                "that charges the 52 bytes twice; they already cover the forward and the "
                "backward pass together",
            ),
            slips.Slip(
                48.0,
                "that is the whole global batch (192 sequences); each of the 48 "
                "GPUs trains its own 4",
            ),
            *slips.si_prefixes("ms", hi=6),
        ),
    ),
    hints=(
        "Logits per GPU per step: 4 x 4,096 tokens x 131,072 words.",
        "Bytes = logits x 52; time = bytes / 1.643e12 B/s, in ms.",
        "Where the 52 comes from, per logit: forward, a cast to FP32 (2 + 4), the max (4), "
        "subtracting it (4 + 4), exp (4 + 4), the sum (4), dividing by it (4 + 4); backward, "
        "scaling by the loss's gradient (4 + 4) and a cast back to BF16 (4 + 2).",
    ),
    solution=_eager_loss_ms,
    solution_text="4 * 4096 * 131072 * 52 / 1.643e12 * 1e3   # 68 ms, a fifth of the "
    "model's step; 52 = (6 + 4 + 8 + 8 + 4 + 8) forward + (8 + 6) backward; a fused "
    "kernel's 12 bytes per logit would take 16 ms",
)
