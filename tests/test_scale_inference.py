"""Serving: per-layer fixed costs, KV replication, the latency-throughput curve, tokens per MW
at equal latency per user, the decode calibration, and mixture-of-experts training."""

from __future__ import annotations

import pytest

from trnlab import catalog, scale
from trnlab.scale import WorkloadError, inference
from trnlab.scale import _calibration as calibration
from trnlab.scale._published import DECODE_CASES


def test_decode_pays_two_all_reduces_and_a_step_cost_per_layer():
    r = inference("llama3-70b", "trn2.48xlarge", tp=16, batch=1, prompt=1024, output=128)
    m = scale.model("llama3-70b")
    over = catalog.chip("trn2").figures["decode_layer_overhead"].value
    ar = scale.collective_time("all_reduce", 2 * m.hidden, catalog.system("trn2.48xlarge"), 16)
    assert r.tpot_comm == pytest.approx(2 * m.layers * ar)
    assert r.tpot_overhead == pytest.approx(m.layers * over)
    assert r.tpot == pytest.approx(
        max(r.tpot_memory_bound, r.tpot_compute_bound) + r.tpot_comm + r.tpot_overhead
    )
    bare = inference("llama3-70b", "trn2.48xlarge", tp=16, batch=1, prompt=1024, output=128,
                     layer_overhead=0.0)  # fmt: skip
    assert r.tpot - bare.tpot == pytest.approx(m.layers * over)


def test_the_catalogued_decode_overheads_are_what_the_calibration_fits():
    for chip in ("trn1", "trn2"):
        fitted = calibration.calibrate_decode_overhead(chip)
        stored = catalog.chip(chip).figures["decode_layer_overhead"]
        assert stored.value == pytest.approx(fitted, rel=0.01)
        assert stored.extra.get("calibrated") is True
    roles = [c.role for c in DECODE_CASES]
    assert roles.count("calibration") == 2 and roles.count("validation") >= 6


def test_kv_heads_are_replicated_beyond_tp_equal_to_kv_heads():
    m = scale.model("llama3-70b")
    kw = dict(batch=4, prompt=4096, output=256)
    at8 = inference(m, "trn2.48xlarge", tp=8, **kw)
    at16 = inference(m, "trn2.48xlarge", tp=16, **kw)
    assert at16.memory.kv_cache == pytest.approx(at8.memory.kv_cache)
    assert at16.memory.weights == pytest.approx(at8.memory.weights / 2)


def test_the_latency_throughput_curve_trades_per_user_speed_for_per_chip_throughput():
    curve = scale.serving_curve("llama3-8b", "trn2.48xlarge", tp=4, prompt=1024, output=256,
                                batches=[1, 4, 16, 64])  # fmt: skip
    assert [p.batch for p in curve] == [1, 4, 16, 64]
    users = [p.tokens_per_second_per_user for p in curve]
    chips = [p.tokens_per_second_per_chip for p in curve]
    assert users == sorted(users, reverse=True)  # bigger batches: slower per user
    assert chips == sorted(chips)  # ... and more tokens per chip
    assert curve[0].tokens_per_second_per_user == pytest.approx(1 / curve[0].result.tpot)


def test_tokens_per_megawatt_are_compared_at_equal_latency_per_user():
    kw = dict(tp=4, prompt=1024, output=256, batches=[1, 2, 4, 8, 16, 32, 64])
    trn3 = scale.tokens_per_megawatt_at("llama3-70b", "trn3-ultraserver-gen2", 20, **kw)
    assert trn3.tokens_per_second_per_user >= 20
    faster = [p for p in scale.serving_curve("llama3-70b", "trn3-ultraserver-gen2", **kw)
              if p.tokens_per_second_per_user >= 20]  # fmt: skip
    assert trn3.batch == max(faster, key=lambda p: p.tokens_per_second_per_chip).batch
    assert trn3.tokens_per_megawatt == pytest.approx(
        trn3.tokens_per_second_per_chip / (catalog.chip("trn3").power / 1e6)
    )
    with pytest.raises(WorkloadError, match="power figure"):
        scale.tokens_per_megawatt_at("llama3-70b", "trn2.48xlarge", 20, **kw)
    with pytest.raises(WorkloadError, match="no batch reaches"):
        scale.tokens_per_megawatt_at("llama3-70b", "trn3-ultraserver-gen2", 1e6, **kw)


@pytest.mark.parametrize(
    "call",
    [
        lambda: inference("llama3-8b", "trn2.48xlarge", prompt=0),
        lambda: inference("llama3-8b", "trn2.48xlarge", output=-1),
        lambda: inference("llama3-8b", "trn2.48xlarge", batch=2.5),
        lambda: inference("llama3-8b", "trn2.48xlarge", weight_format="fp7"),
        lambda: inference("llama3-8b", "trn2.48xlarge", weight_format="mxfp4"),
        lambda: inference("llama3-8b", "trn2.48xlarge", usable_hbm=0.0),
        lambda: inference("llama3-8b", "trn2.48xlarge", usable_hbm=float("nan")),
        lambda: inference("llama3-8b", "trn2.48xlarge", watts_per_chip=-5),
        lambda: inference("llama3-8b", "trn2.48xlarge", layer_overhead=float("nan")),
        lambda: scale.serving_curve("llama3-8b", "trn2.48xlarge", batches=[]),
        lambda: scale.tokens_per_megawatt_at("llama3-8b", "trn2.48xlarge", 0),
    ],
)
def test_bad_serving_requests_are_refused(call):
    with pytest.raises(WorkloadError):
        call()


def test_a_fine_grained_moe_trains_with_expert_parallel_all_to_alls():
    m = scale.model("olmoe-1b-7b")  # 64 experts, 8 active: Muennighoff et al. 2024
    assert m.params / 1e9 == pytest.approx(6.9, rel=0.01)
    assert m.active_params / 1e9 == pytest.approx(1.3, rel=0.02)
    kw = dict(global_batch=64, seq_len=4096)
    dense = scale.plan(m, "trn2.48xlarge", scale.Parallelism(dp=16, ep=1), **kw)
    ep8 = scale.plan(m, "trn2.48xlarge", scale.Parallelism(dp=16, ep=8), **kw)
    assert dense.step["expert all-to-all"] == 0 and ep8.step["expert all-to-all"] > 0
    assert ep8.memory.state < dense.memory.state  # experts split over 8 chips
    # 4 all-to-alls per MoE layer per micro-batch (6 with full recomputation)
    full = scale.plan(m, "trn2.48xlarge", scale.Parallelism(dp=16, ep=8, recompute="full"), **kw)
    assert full.step["expert all-to-all"] == pytest.approx(1.5 * ep8.step["expert all-to-all"])
    found = scale.search(m, "trn2.48xlarge", **kw)
    assert any(r.parallel.ep > 1 for r in found.ranked)
