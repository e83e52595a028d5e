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
    n, tokens = m.params, 1e12
    attention = 12 * m.layers * m.heads * m.head_dim * m.seq_len  # PaLM App. B, per token
    assert m.training_flops(tokens) == pytest.approx(tokens * (6 * n + attention))
    # 12·L·h·T / 6N: attention adds 4% at 2k context and 15% at 8k for a 70B model
    assert m.training_flops_per_token(seq_len=2048) == pytest.approx(6 * n, rel=0.04)
    share_8k = m.training_flops_per_token() / (6 * n) - 1
    assert share_8k == pytest.approx(12 * 80 * 8192 * 8192 / (6 * n), rel=1e-9)
    assert 0.14 < share_8k < 0.16
    assert m.training_flops_per_token(recompute=True) == pytest.approx(
        8 * n + 16 * m.layers * m.heads * m.head_dim * m.seq_len
    )


def test_inference_flops():
    m = scale.model("llama3-8b")
    assert m.decode_flops_per_token(0) == 2 * m.params
    assert m.prefill_flops_per_token(1000) == pytest.approx(2 * m.params + 4 * 32 * 4096 * 1000)


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
    mb = training_memory(m, tp=8, pp=8, micro_batch=b)
    per_layer = s * b * h * (34 + 5 * a * s / h) / 8
    assert mb.activations == pytest.approx(per_layer * m.layers)
    full = training_memory(m, tp=8, pp=8, micro_batch=b, recompute=True)
    # full recomputation: each layer's input, plus one layer's activations while it reruns
    assert full.activations == pytest.approx(2 * s * b * h / 8 * m.layers + per_layer)
    assert full.activations < mb.activations / 30


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
        (lambda: training_memory(scale.model("llama3-70b"), pp=3), "does not divide its 80 layers"),
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
