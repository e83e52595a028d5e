"""The memory-bound kernels of a training step: bytes by hand, what each switch removes, and
their share of a step falling as the hidden size grows (Ivanov et al. 2021)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trnlab import catalog, scale
from trnlab.scale import Parallelism, plan
from trnlab.scale._memory_bound import (
    layer_traffic,
    loss_bytes_per_token,
    optimizer_bytes_per_param,
    stream_bandwidth,
)

# A GPT-style layer (LayerNorm, GELU on 4h, learned positions: no rotary embeddings).
GPT = scale.ModelSpec("gpt-test", 24, 2048, 16, 16, 4 * 2048, 51200, 2048, gated_ffn=False,
                      tied_embeddings=True, learned_positions=True, biases=True, source="test")  # fmt: skip
LLAMA = scale.model("llama3-8b")


def test_one_gpt_layer_by_hand():
    # tp = 1, FlashAttention, no dropout. Forward, per token, in 2-byte values:
    #   two norms read h, write h                        -> 4h
    #   two residual adds read branch + stream, write h  -> 6h
    #   GELU reads and writes the 4h MLP activation      -> 8h
    # Backward: norms read dy and x, write dx (6h); the residual stream's two gradients are
    # added (read 2h, write h, twice: 6h); GELU reads dy and x, writes dx (12h).
    h = 2048
    t = layer_traffic(GPT, tp=1, seq_len=2048)
    assert t.forward == pytest.approx((4 + 6 + 8) * h * 2)
    assert t.backward == pytest.approx((6 + 6 + 12) * h * 2)
    assert t.recompute == 0


def test_materialised_scores_cost_bytes_in_proportion_to_the_keys():
    # Without FlashAttention the softmax reads and writes a/tp x s scores per token forward
    # (and reads two, writes one backward): the extra bytes double with the sequence.
    extra = []
    for s in (2048, 4096):
        plain = layer_traffic(GPT, tp=2, seq_len=s, flash_attention=False)
        flash = layer_traffic(GPT, tp=2, seq_len=s)
        extra.append(plain.forward - flash.forward)
        assert plain.backward - flash.backward == pytest.approx(GPT.heads / 2 * s * 3 * 2)
    assert extra[0] == pytest.approx(GPT.heads / 2 * 2048 * 2 * 2)
    assert extra[1] == pytest.approx(2 * extra[0])


def test_recomputation_reruns_what_it_says():
    kw = dict(tp=4, seq_len=4096, flash_attention=False)
    none = layer_traffic(GPT, recompute="none", **kw)
    sel = layer_traffic(GPT, recompute="selective", **kw)
    full = layer_traffic(GPT, recompute="full", **kw)
    flash = layer_traffic(GPT, tp=4, seq_len=4096)
    assert none.recompute == 0
    assert sel.recompute == pytest.approx(none.forward - flash.forward)  # the score kernels
    assert full.recompute == pytest.approx(none.forward)  # the whole forward


@given(tp=st.sampled_from([2, 4, 8, 16]), dropout=st.booleans())
@settings(max_examples=20, deadline=None)
def test_sequence_parallelism_splits_the_outside_kernels(tp, dropout):
    sp = layer_traffic(LLAMA, tp=tp, seq_len=8192, dropout=dropout)
    rep = layer_traffic(LLAMA, tp=tp, seq_len=8192, sequence_parallel=False, dropout=dropout)
    one_sp = layer_traffic(LLAMA, tp=1, seq_len=8192, dropout=dropout)
    one_rep = layer_traffic(LLAMA, tp=1, seq_len=8192, sequence_parallel=False, dropout=dropout)
    # the norms and residuals: replicated on every chip without SP, a 1/tp share with it
    outside_rep = rep.total - sp.total
    assert outside_rep > 0
    assert one_sp.total == pytest.approx(one_rep.total)  # one chip: nothing to split
    # dropout only adds bytes
    assert sp.total >= layer_traffic(LLAMA, tp=tp, seq_len=8192).total


def test_optimizer_and_loss_bytes_by_hand():
    # Adam with clipping: read the gradient twice, read and write FP32 master, m, v (24 B),
    # write the BF16 weight (2 B).
    assert optimizer_bytes_per_param(2) == 2 * 2 + 24 + 2
    assert optimizer_bytes_per_param(4) == 2 * 4 + 24 + 2
    # cross-entropy: read BF16 logits, write FP32 softmax; read it back, write BF16 gradients
    assert loss_bytes_per_token(LLAMA, tp=8) == pytest.approx(LLAMA.vocab / 8 * 12)


def test_megatrons_eager_loss_by_its_kernels():
    # Megatron-LM's unfused vocabulary-parallel cross-entropy, one PyTorch kernel per line of
    # its source, as (bytes read, bytes written) per logit: BF16 = 2, FP32 = 4.
    forward = [(2, 4), (4, 0), (4, 4), (4, 4), (4, 0), (4, 4)]  # cast, max, -max, exp, sum, /sum
    backward = [(4, 4), (4, 2)]  # softmax x the loss's gradient, cast back to BF16
    per_logit = sum(r + w for r, w in forward + backward)
    for tp in (1, 8):
        eager = loss_bytes_per_token(LLAMA, tp=tp, fused=False)
        assert eager == pytest.approx(LLAMA.vocab / tp * per_logit)
        assert eager > 4 * loss_bytes_per_token(LLAMA, tp=tp)  # the fused kernel's roofline


def test_an_eager_loss_costs_the_last_stage_its_extra_bytes():
    # One chip (tp = 1), so every token of every micro-batch meets the whole vocabulary.
    kw = dict(global_batch=8, seq_len=2048)
    runs = {}
    for fused in (True, False):
        par = Parallelism(tp=1, dp=8, zero=1, fused_loss=fused)
        runs[fused] = plan("llama3-8b", "p5.48xlarge", par, **kw)
    extra = runs[False].step["memory-bound kernels"] - runs[True].step["memory-bound kernels"]
    tokens = 2048  # one sequence per chip
    per_token = loss_bytes_per_token(LLAMA, fused=False) - loss_bytes_per_token(LLAMA)
    assert extra == pytest.approx(tokens * per_token / stream_bandwidth(catalog.chip("h100")))
    assert runs[False].step["compute"] == runs[True].step["compute"]
    assert runs[False].mfu < runs[True].mfu


def test_streams_run_at_the_measured_bandwidth_where_there_is_one():
    assert stream_bandwidth(catalog.chip("a100")) == pytest.approx(1.616e12)
    # H100: PyTorch's layer norm on 2048 x 8192 FP32 values, read once and written once in
    # 82 us: 2 x 2048 x 8192 x 4 B / 82 us = 1.64 TB/s, about half the 3.35 TB/s roofline
    h100 = stream_bandwidth(catalog.chip("h100"))
    assert h100 == pytest.approx(2 * 2048 * 8192 * 4 / 82e-6, rel=0.01)
    assert h100 < 0.5 * catalog.chip("h100").hbm_bandwidth
    trn2 = catalog.chip("trn2")
    assert stream_bandwidth(trn2) == trn2.hbm_bandwidth  # the roofline


def test_their_share_of_a_step_falls_as_the_hidden_size_grows():
    # Ivanov et al. 2021: these kernels scale with h, the matmuls with h^2.
    shares = []
    for h in (2048, 4096, 8192, 16384):
        m = scale.ModelSpec(f"gpt-{h}", 8, h, h // 128, h // 128, 4 * h, 51200, 2048,
                            gated_ffn=False, biases=True, source="test")  # fmt: skip
        r = plan(m, "dgx-a100", Parallelism(tp=8, dp=1, zero=0, flash_attention=False,
                                            dropout=True), global_batch=4, seq_len=2048)  # fmt: skip
        assert r.feasible, r.problems
        shares.append(r.step["memory-bound kernels"] / r.step["compute"])
    assert shares == sorted(shares, reverse=True)
    assert shares[0] > 2 * shares[-1]


def test_a_step_charges_the_optimizer_on_the_parameters_the_chip_updates():
    kw = dict(global_batch=64, seq_len=2048)
    z0 = plan("llama3-8b", "trn2.48xlarge", Parallelism(tp=4, dp=4, zero=0), **kw)
    z1 = plan("llama3-8b", "trn2.48xlarge", Parallelism(tp=4, dp=4, zero=1), **kw)
    # ZeRO-1 shards the update over the 4 replicas
    assert z1.step["optimizer step"] == pytest.approx(z0.step["optimizer step"] / 4)
    # tp=4 on Trainium2 is 16 ranks: the 8 KV heads are copied to 16 (K and V of 8 more heads,
    # 4,096 x 128 each, 32 layers), held and updated like any weight
    copies = 2 * 4096 * 128 * 8 * 32
    per_chip = (scale.model("llama3-8b").params + copies) / 4
    expected = per_chip * optimizer_bytes_per_param(2) / catalog.chip("trn2").hbm_bandwidth
    assert z0.step["optimizer step"] == pytest.approx(expected, rel=0.01)
