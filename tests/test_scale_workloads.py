"""Workloads and memory: published parameter counts, 6ND, ZeRO, activation and KV formulas."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trnlab import scale
from trnlab.scale import ModelSpec, WorkloadError, inference_memory, training_memory

# (preset, published total parameters, published active parameters), in billions.
PUBLISHED = [
    ("llama3-8b", 8.03, 8.03),  # Llama 3 Herd, Table 3 ("8B": 8.03B on the model card)
    ("llama3-70b", 70.6, 70.6),  # model card: 70.6B
    ("llama3-405b", 405, 405),
    ("gpt3-175b", 175, 175),  # Brown et al. 2020: 175.0B
    ("mixtral-8x7b", 46.7, 12.9),  # Jiang et al. 2024: 47B total, 13B active
    ("mixtral-8x22b", 141, 39),  # model card: 141B total, 39B active
]


@pytest.mark.parametrize(("name", "total", "active"), PUBLISHED)
def test_parameter_counts_match_the_published_totals(name, total, active):
    m = scale.model(name)
    assert m.params / 1e9 == pytest.approx(total, rel=0.01)
    assert m.active_params / 1e9 == pytest.approx(active, rel=0.01)


def test_training_flops_are_6nd_plus_attention():
    m = scale.model("llama3-70b")
    # N: the parameters a token multiplies. The input embedding table (128,256 x 8,192) is a
    # lookup, not a matmul, and the 2 x 80 + 1 RMSNorm vectors are not matmuls either.
    n = m.params - 128256 * 8192 - (2 * 80 + 1) * 8192
    assert m.matmul_params == n
    tokens = 1e12
    attention = 12 * m.layers * m.heads * m.head_dim * m.seq_len  # PaLM App. B, per token
    assert m.training_flops(tokens) == pytest.approx(tokens * (6 * n + attention))
    # 12·L·h·T / 6N: attention adds 4% at 2k context and 15% at 8k for a 70B model
    assert m.training_flops_per_token(seq_len=2048) == pytest.approx(6 * n, rel=0.04)
    share_8k = m.training_flops_per_token() / (6 * n) - 1
    assert share_8k == pytest.approx(12 * 80 * 8192 * 8192 / (6 * n), rel=1e-9)
    assert 0.14 < share_8k < 0.16
    attn_fwd = 4 * m.layers * m.heads * m.head_dim * m.seq_len
    assert m.training_flops_per_token(recompute=True) == pytest.approx(
        8 * n + 16 * m.layers * m.heads * m.head_dim * m.seq_len
    )
    assert m.training_flops_per_token("full") == m.training_flops_per_token(True)
    assert m.training_flops_per_token("selective") == pytest.approx(
        m.model_flops_per_token() + attn_fwd
    )


def test_inference_flops():
    m = scale.model("llama3-8b")
    assert m.decode_flops_per_token(0) == 2 * m.matmul_params
    assert m.prefill_flops_per_token(1000) == pytest.approx(
        2 * m.matmul_params + 4 * 32 * 4096 * 1000
    )


def test_moe_training_counts_active_parameters():
    m = scale.model("mixtral-8x7b")
    dense_equiv = m.with_(experts=1, top_k=1)
    assert m.training_flops_per_token() == pytest.approx(
        dense_equiv.training_flops_per_token() + 6 * m.layers * (m.expert_params + m.hidden * 8)
    )


def test_mixed_precision_adam_is_16_bytes_per_parameter_and_zero_divides_it():
    m = scale.model("llama3-8b")
    nd = 64

    def state(z):
        mb = training_memory(m, dp=nd, zero=z, recompute=True)
        return (mb.weights + mb.gradients + mb.optimizer) / m.params

    # ZeRO paper (Rajbhandari et al. 2020), Figure 1: 16, 4 + 12/Nd, 2 + 14/Nd, 16/Nd bytes/param
    assert state(0) == pytest.approx(16)
    assert state(1) == pytest.approx(4 + 12 / nd)
    assert state(2) == pytest.approx(2 + 14 / nd)
    assert state(3) == pytest.approx(16 / nd)


def test_activation_memory_follows_korthikanti():
    m = scale.model("gpt3-175b")
    s, b, h, a = 2048, 1, 12288, 96
    old = dict(tp=8, pp=8, micro_batch=b, flash_attention=False)
    mb = training_memory(m, **old)
    per_layer = s * b * h * (34 + 5 * a * s / h) / 8  # with sequence parallelism
    assert mb.activations == pytest.approx(per_layer * m.layers)
    no_sp = training_memory(m, **old, sequence_parallel=False)
    assert no_sp.activations == pytest.approx(s * b * h * (10 + 24 / 8 + 5 * a * s / h / 8) * 96)
    full = training_memory(m, tp=8, pp=8, micro_batch=b, recompute=True, flash_attention=False)
    # full recomputation: each layer's input, plus one layer's activations while it reruns
    assert full.activations == pytest.approx(2 * s * b * h / 8 * m.layers + per_layer)
    assert full.activations < mb.activations / 30
    # selective recomputation and FlashAttention both drop the 5as/h score term: 34 sbh / t
    for kw in (dict(recompute="selective", flash_attention=False), dict()):
        sel = training_memory(m, tp=8, pp=8, micro_batch=b, **kw)
        assert sel.activations == pytest.approx(34 * s * b * h / 8 * m.layers)
    # the last stage keeps the FP32 logits of one micro-batch: 4 s b V / t
    assert mb.logits == 0 or mb.logits == pytest.approx(4 * s * b * m.vocab / 8)


# Korthikanti et al. 2022, Figure 1 (activation memory per GPU, GiB, read off the chart by
# Calculon's validation, calculon/llm/validation.py): no recomputation without sequence
# parallelism ("none"), and sequence parallelism with selective recomputation ("seqsel").
# (model, tp, pp, virtual stages, micro-batch, profiled none, profiled seqsel)
KORTHIKANTI_FIG1 = [
    (("megatron-22b", 48, 6144, 64, 24576), 8, 1, 1, 4, 59.25, 9.5625),
    (("gpt3-175b", 96, 12288, 96, 49152), 8, 8, 3, 1, 66.84375, 12.3515625),
    (("turing-530b", 105, 20480, 128, 81920), 8, 35, 3, 1, 114.0234375, 23.076171875),
    (("megatron-1t", 128, 25600, 160, 102400), 8, 64, 1, 1, 131.25, 26.5625),
]


@pytest.mark.parametrize(("shape", "tp", "pp", "v", "b", "none", "seqsel"), KORTHIKANTI_FIG1)
def test_activation_memory_matches_korthikanti_figure_1(shape, tp, pp, v, b, none, seqsel):
    name, layers, hidden, heads, ffn = shape
    m = ModelSpec(name, layers, hidden, heads, heads, ffn, 51200, 2048, gated_ffn=False)
    kw = dict(tp=tp, pp=pp, virtual_stages=v, micro_batch=b, micro_batches=max(pp, 8))
    got_none = training_memory(m, **kw, sequence_parallel=False, flash_attention=False)
    got_sel = training_memory(m, **kw, recompute="selective")
    assert got_none.activations / 2**30 == pytest.approx(none, rel=0.01)
    assert got_sel.activations / 2**30 == pytest.approx(seqsel, rel=0.01)


def test_the_interleaved_schedule_keeps_more_micro_batches_in_flight():
    m = scale.model("gpt3-175b")
    plain = training_memory(m, tp=8, pp=8, micro_batches=64)
    inter = training_memory(m, tp=8, pp=8, micro_batches=64, virtual_stages=3)
    assert inter.activations == pytest.approx(plain.activations * (1 + 7 / 24))
    few = training_memory(m, tp=8, pp=8, micro_batches=2)  # only 2 of 8 slots in flight
    assert few.activations == pytest.approx(plain.activations * 2 / 8)


def test_uneven_stages_give_the_first_and_last_one_layer_less():
    m = scale.model("llama3-405b")  # 126 layers on 16 stages, as Llama 3 trained it
    assert scale.stage_layers(m, 16) == (7,) + (8,) * 14 + (7,)
    assert scale.stage_layers(m, 7) == (18,) * 7
    assert sum(scale.stage_layers(m, 5)) == 126
    with pytest.raises(WorkloadError, match="add up to"):
        scale.stage_layers(m, 2, (60, 60))
    with pytest.raises(WorkloadError, match="at most 126"):
        scale.stage_layers(m, 127)


def test_megatron_state_is_18_bytes_per_parameter():
    m = scale.model("llama3-8b")
    mem = training_memory(m, megatron_state=True)
    assert mem.state / m.params == pytest.approx(18)


def test_zero3_keeps_gathered_weights_of_two_layers_or_of_the_stage():
    m = scale.model("llama3-8b")
    re = training_memory(m, dp=64, zero=3)
    assert re.buffers == pytest.approx(2 * 2 * m.params / m.layers)
    kept = training_memory(m, dp=64, zero=3, reshard=False)
    assert kept.weights + kept.buffers == pytest.approx(2 * m.params)


def test_kv_cache_is_replicated_when_tp_exceeds_the_kv_heads():
    m = scale.model("llama3-70b")  # 8 KV heads
    per_token = m.kv_bytes_per_token(2)
    at8 = inference_memory(m, batch=1, context=1000, tp=8)
    at32 = inference_memory(m, batch=1, context=1000, tp=32)
    assert at8.kv_cache == pytest.approx(1000 * per_token / 8)
    assert at32.kv_cache == at8.kv_cache  # 32 chips, but each still holds one KV head


def test_kv_heads_are_copied_per_rank_when_a_chip_runs_several_ranks():
    """A Trainium chip runs one tensor-parallel rank per NeuronCore: at tp=16 chips Llama 3 70B's
    8 KV heads are copied onto 32 ranks, so each chip holds two copies of one head (1/4 of the
    cache, not 1/8); below the KV heads nothing is copied."""
    m = scale.model("llama3-70b")
    per_token = m.kv_bytes_per_token(2)
    trn1 = inference_memory(m, batch=1, context=1000, tp=16, ranks_per_chip=2)
    assert trn1.kv_cache == pytest.approx(1000 * per_token * 2 / 8)
    split = inference_memory(m, batch=1, context=1000, tp=2, ranks_per_chip=4)
    assert split.kv_cache == pytest.approx(1000 * per_token / 2)
    with pytest.raises(scale.WorkloadError, match="ranks_per_chip"):
        inference_memory(m, batch=1, context=1000, ranks_per_chip=0)


def test_kv_cache_bytes():
    m = scale.model("llama3-70b")
    # 2 (K, V) x 80 layers x 8 KV heads x 128 dims x 2 bytes = 327,680 bytes per token
    assert m.kv_bytes_per_token(2) == 327_680
    mem = inference_memory(m, batch=4, context=8192, tp=8)
    assert mem.kv_cache == pytest.approx(4 * 8192 * 327_680 / 8)
    assert mem.weights == pytest.approx(m.params * 2 / 8, rel=1e-9)


def test_mx_weights_carry_their_block_scales():
    m = scale.model("llama3-8b")
    mx4 = inference_memory(m, batch=1, context=1, weight_format="mxfp4")
    # 4-bit elements plus one 8-bit scale per 32: 4.25 bits per weight
    assert mx4.weights == pytest.approx(m.params * 4.25 / 8)


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (lambda: training_memory(scale.model("llama3-70b"), pp=81), "at most 80 stages"),
        (lambda: training_memory(scale.model("llama3-70b"), seq_len=0), "whole number >= 1"),
        (lambda: training_memory(scale.model("llama3-70b"), micro_batch=0), "whole number"),
        (lambda: training_memory(scale.model("llama3-70b"), recompute="some"), "selective"),
        (
            lambda: training_memory(scale.model("llama3-70b"), pp=40, virtual_stages=3),
            "at least 3 layers",
        ),
        (
            lambda: inference_memory(
                scale.model("llama3-8b"), batch=1, context=1, weight_format="fp7"
            ),
            "unknown number format",
        ),
        (lambda: training_memory(scale.model("llama3-70b"), tp=3), "must divide the 64"),
        (lambda: training_memory(scale.model("llama3-8b"), dp=0), "whole number >= 1"),
        (lambda: training_memory(scale.model("llama3-8b"), zero=4), "ZeRO stage"),
        (lambda: training_memory(scale.model("mixtral-8x7b"), ep=3), "3 does not divide its 8"),
        (lambda: scale.model("llama4-2t"), "unknown model"),
        (lambda: ModelSpec("x", 2, 100, 3, 1, 10, 10, 10), "not divisible by 3 heads"),
        (lambda: ModelSpec("x", 2, 96, 8, 3, 10, 10, 10), "kv_heads must divide"),
        (lambda: ModelSpec("x", 0, 96, 8, 8, 10, 10, 10), "layers must be"),
        (lambda: scale.model("llama3-8b").training_flops(-1), "positive"),
    ],
)
def test_impossible_requests_raise_clear_errors(call, says):
    with pytest.raises(WorkloadError, match=says):
        call()


@given(
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.sampled_from([1, 2, 4, 8, 16]),
    dp=st.integers(1, 512),
    zero=st.integers(0, 3),
)
def test_more_sharding_never_needs_more_memory(tp, pp, dp, zero):
    m = scale.model("llama3-70b")
    base = training_memory(m, tp=tp, pp=pp, dp=dp, zero=zero, recompute=True)
    assert base.total > 0
    if zero < 3:
        more = training_memory(m, tp=tp, pp=pp, dp=dp, zero=zero + 1, recompute=True)
        assert more.total <= base.total
    wider = training_memory(m, tp=tp, pp=pp, dp=dp * 2, zero=zero, recompute=True)
    assert wider.total <= base.total


def test_serving_pads_query_heads_the_ranks_do_not_divide_and_training_refuses_them():
    """Llama 2 13B's 40 heads on 32 NeuronCores: the serving frameworks pad them to 64 (and its
    40 KV heads with them), so every rank holds 2 heads' Q, K, V and O weights; training at a
    tp that does not divide the heads is refused."""
    m = scale.model("llama2-13b")
    mem = inference_memory(m, batch=1, context=1024, tp=16, ranks_per_chip=2)
    padded = 4 * 5120 * 128 * (64 - 40) * 40  # Q, K, V, O rows of 24 padded heads, 40 layers
    assert mem.weights == pytest.approx((m.params + padded) / 16 * 2)
    assert mem.kv_cache == pytest.approx(1024 * m.kv_bytes_per_token(2) * 64 / 40 / 16)
    with pytest.raises(scale.WorkloadError, match="must divide the 40 attention heads"):
        training_memory(m, tp=16)
    # 4 chips divide 40 heads, but 4 Trainium2 chips are 16 ranks, which do not
    with pytest.raises(scale.WorkloadError, match=r"16 ranks \(4 chips x 4 NeuronCores\)"):
        training_memory(m, tp=4, ranks_per_chip=4)
    r = scale.plan(m, "trn2.48xlarge", scale.Parallelism(tp=4, dp=4), global_batch=16)
    assert not r.feasible and any("16 ranks" in why for why in r.problems)
