"""Decode attention on Trainium: the time one layer's attention over the KV cache takes per
generated token, from the NeuronCore model.

A decode step is a chain of small operations, and attention over a long cache is the one that
grows with the context: each NeuronCore streams its KV heads' keys and values from HBM and
takes a softmax as long as the context for the few query heads that share each KV head. Its
time is not the KV bytes at the HBM roofline (a whole chip's bandwidth, every byte in flight at
once): it is the :func:`trnlab.kernels.nki_decode_attention` kernel timed on one NeuronCore of
the chip, each of its tensor-parallel ranks walking the cache of its own KV heads (one walk
per sequence and KV head).

The context is the sequence length the decode graph was compiled for (by default prompt +
output; ``inference(compiled_length=...)`` names a token-generation bucket): Neuron's decode
graphs have fixed shapes and every step reads the cache up to that length, masking the
positions not yet written (``ndoc-vllm-neuron-decode-buckets``; the Trn1 decode table agrees:
Llama-3-8B compiled for 8,192 positions decodes at 7.03 ms from a 128-token prompt and 7.04 ms
from a 4,096-token one, 5.86 ms compiled for 4,096).

Chips without a NeuronCore model (GPUs) read the cache at their HBM bandwidth instead
(FlashDecoding-style kernels stream it); the caller charges that as bytes.
"""

from __future__ import annotations

import math
from functools import lru_cache

from trnlab import catalog

from ._workloads import ModelSpec, WorkloadError

__all__ = ["decode_attention_time", "overlapped_walk"]

# Beyond this many cached positions the kernel's time is extended by its per-block slope (each
# block of keys is the same work), so a million-token context costs no longer to evaluate.
_SIMULATED = 32768


def decode_attention_time(
    model: ModelSpec,
    chip_key: str,
    tp: int,
    batch: int,
    context: int,
    kv_bytes: float,
    kv_sharding: str = "replicate_to_tp",
) -> tuple[float, str] | None:
    """Seconds of attention per layer per decode step on one chip of a ``tp``-chip replica,
    and how it was found; ``None`` for a chip without a NeuronCore model.

    Neuron's frameworks make every logical NeuronCore a tensor-parallel rank
    (:attr:`Chip.tp_ranks`: 2 per Trainium, 4 per Trainium2 at LNC=2), so a ``tp``-chip replica
    has ``tp x ranks`` of them. Each rank holds its share of the KV heads, copies included
    (:meth:`ModelSpec.kv_heads_on` with ``kv_sharding``: by default each head copied until every
    rank has its own, NxD Inference's ``REPLICATE_TO_TP_DEGREE``, ndoc-nxdi-gqa), and
    ``ceil(heads / ranks)`` query heads (padded when they do not divide). A walk is one
    sequence's cache of one KV head, for the query heads that share it on the rank (its rows);
    a rank walks ``batch x its KV heads``, shared over its physical cores (LNC=2: two; a core
    with none idles: a walk is not split, an ASSUMPTION). On each core the first walk takes the kernel's
    whole latency (a chain of dependent steps). The walks after it are independent: a batched
    kernel overlaps them and puts the rows of up to 128 / rows walks on the partitions of one
    Vector, Scalar or GpSimd instruction (an engine instruction costs the same on 1 partition
    as on 128), so each further walk adds the largest of its bytes at the core's DMA bandwidth,
    its Tensor Engine time and its share of the other engines' time (an ASSUMPTION, checked
    by the batch 4 and 8 rows of the Trn1 and Inf2 decode tables, docs/validation.md). The
    cache walks in BF16, FP32 or FP8 tiles (a format of fewer than 8 bits walks as FP8, an
    ASSUMPTION that overstates its bytes).

    Raises
    ------
    WorkloadError
        A head wider than the 128 partitions (not modelled yet).
    """
    chip = catalog.chip(chip_key)
    if chip.core is None or not chip.cores:
        return None
    partitions = chip.core.sbuf_partitions
    if model.head_dim > partitions:
        raise WorkloadError(
            f"{model.name} has heads of {model.head_dim} values; trnlab's decode-attention kernel "
            f"puts the head dimension on the {partitions} partitions of a NeuronCore, so wider "
            f"heads are not modelled yet. Serve it on a GPU system, or model heads of <= "
            f"{partitions}."
        )
    ranks = tp * chip.tp_ranks
    kv_per_rank = model.kv_heads_on(ranks, kv_sharding) // ranks
    rows = math.ceil(math.ceil(model.heads / ranks) / kv_per_rank)
    pieces = math.ceil(rows / partitions)  # more query heads than partitions: in pieces
    rows = math.ceil(rows / pieces)
    fmt = "float8_e4m3" if kv_bytes <= 1.5 else ("bfloat16" if kv_bytes <= 2.5 else "float32")
    latency, further = _kernel_time(chip.key, rows, model.head_dim, context, fmt)
    walks = math.ceil(batch * kv_per_rank * pieces / chip.lnc)  # on the rank's busiest core
    per_layer = latency + (walks - 1) * further
    where = (
        f"NeuronCore model: decode attention over {context:,} positions on {ranks:,} "
        f"tensor-parallel ranks ({kv_per_rank} KV head{'s' if kv_per_rank > 1 else ''} each"
        f"{', replicated' if ranks > model.kv_heads else ''}), {walks:,} walk"
        f"{'s' if walks > 1 else ''} of the cache per core ({rows} query head"
        f"{'s' if rows > 1 else ''} each): the first {latency * 1e6:,.1f} us, each further "
        f"{further * 1e6:,.1f} us (overlapped: its bytes, its matmuls or its share of the "
        f"engines, an assumption)"
    )
    return per_layer, where


@lru_cache(maxsize=256)
def _kernel_time(chip_key: str, rows: int, d: int, context: int, fmt: str) -> tuple[float, float]:
    """The decode-attention kernel's own latency (no launch overhead) on one core, and what
    one more, overlapped walk adds (see :func:`decode_attention_time`)."""
    from trnlab.kernels import BLOCK_DECODE

    if context <= _SIMULATED:
        return _simulate(chip_key, rows, d, context, fmt)
    full = _simulate(chip_key, rows, d, _SIMULATED, fmt)
    less = _simulate(chip_key, rows, d, _SIMULATED - BLOCK_DECODE, fmt)
    more = (context - _SIMULATED) / BLOCK_DECODE  # each block of keys is the same work
    return tuple(f + (f - x) * more for f, x in zip(full, less, strict=True))


@lru_cache(maxsize=256)
def _simulate(chip_key: str, rows: int, d: int, context: int, fmt: str) -> tuple[float, float]:
    import trnlab.nki as nki
    from trnlab import core
    from trnlab.kernels import nki_decode_attention

    graph = core.core_params(chip_key).compiled_graph()  # a compiled graph's descriptors
    run = nki.profile(nki_decode_attention, chip=graph)(
        nki.hbm((d, rows), fmt), nki.hbm((d, context), fmt), nki.hbm((context, d), fmt)
    )
    return run.latency, overlapped_walk(run, rows)


def overlapped_walk(run, rows: int) -> float:
    """What one more walk adds when a batched kernel overlaps it with others: the largest of
    its bytes at the core's DMA bandwidth, its Tensor Engine busy time, and the other engines'
    busy time shared by the ``128 // rows`` walks whose rows fill one instruction's
    partitions."""
    per_instruction = max(1, run.params.sbuf_partitions // rows)
    shared = max(
        (f * run.latency for e, f in run.busy.items() if e not in ("DMA", "Tensor")),
        default=0.0,
    )
    return max(run.memory_bound_s, run.busy.get("Tensor", 0.0) * run.latency,
               shared / per_instruction)  # fmt: skip
