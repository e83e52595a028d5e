"""Plans, search and inference: standard results, fabric-sourced communication, clear refusals."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trnlab import catalog, fabric, scale
from trnlab.scale import Parallelism, WorkloadError, inference, plan, search
from trnlab.scale import _plan as plan_module

GIB = 2**30


def test_pipeline_bubble_is_p_minus_1_over_m_plus_p_minus_1():
    p, gb = 4, 64
    r = plan(
        "llama3-8b",
        "trn2.48xlarge",
        Parallelism(tp=2, pp=p, dp=2, recompute=True),
        global_batch=gb,
        seq_len=2048,
    )
    m = gb // (1 * 2)  # micro-batches per data-parallel replica
    share = r.step["pipeline bubble"] / (r.step["compute"] + r.step["pipeline bubble"])
    assert share == pytest.approx((p - 1) / (m + p - 1))


def test_communication_comes_from_the_fabric(monkeypatch):
    calls = []

    class Fixed:
        time = 1e-3

    def fake(op, nbytes, system=None, algorithm="auto", **kw):
        calls.append((op, nbytes, system.chips))
        return Fixed()

    monkeypatch.setattr(fabric, "collective", fake)
    plan_module._ring_time.cache_clear()
    try:
        r = plan(
            "llama3-8b",
            "trn2.48xlarge",
            Parallelism(tp=4, pp=1, dp=4),
            global_batch=64,
            seq_len=1024,
        )
    finally:
        plan_module._ring_time.cache_clear()
    # 4 tensor-parallel all-reduces per layer per micro-batch, each 1 ms by the fake fabric
    micro_batches = 64 // 4
    assert r.step["tensor parallel"] == pytest.approx(micro_batches * 32 * 4 * 1e-3)
    assert ("all_reduce", 1 * 1024 * 4096 * 2, 4) in calls


def test_groups_larger_than_a_torus_axis_run_at_the_slowest_axis():
    eff = catalog.table("collectives")["neuronlink_efficiency"].value
    t = scale.tiers("trn2-ultraserver")
    assert t.domain == 64
    assert t.link_for(4) == (pytest.approx(eff * 128e9), 5e-7)  # one axis of the instance
    assert t.link_for(32)[0] == pytest.approx(eff * 64e9)  # crosses the rings between them
    assert scale.tiers("trn3-ultraserver-gen2").link_for(144)[0] == pytest.approx(eff * 1.28e12)


def test_mfu_counts_model_flops_against_the_published_peak():
    r = plan(
        "llama3-70b",
        "trn2-ultraserver",
        Parallelism(tp=8, pp=4, dp=2, recompute=True),
        global_batch=256,
        seq_len=4096,
    )
    peak = 64 * catalog.chip("trn2").peak_flops("bf16")
    model_flops = 256 * 4096 * scale.model("llama3-70b").training_flops_per_token(seq_len=4096)
    assert r.mfu == pytest.approx(model_flops / (r.step_time * peak))
    assert 0 < r.mfu < 1


@settings(max_examples=25, deadline=None)
@given(
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.sampled_from([1, 2]),
    zero=st.sampled_from([1, 3]),
    recompute=st.booleans(),
    mb=st.sampled_from([1, 2]),
)
def test_mfu_never_exceeds_one(tp, pp, zero, recompute, mb):
    dp = 16 // (tp * pp)
    r = plan(
        "llama3-8b",
        "trn2.48xlarge",
        Parallelism(tp=tp, pp=pp, dp=dp, zero=zero, recompute=recompute, micro_batch=mb),
        global_batch=64,
        seq_len=2048,
    )
    if r.feasible:
        assert 0 < r.mfu <= 1
        assert r.step_time >= r.step["compute"]


def test_time_cost_and_energy_follow_from_the_step():
    r = plan(
        "llama3-8b",
        "trn1.32xlarge",
        Parallelism(tp=8, dp=2, recompute=True),
        global_batch=64,
        seq_len=2048,
        tokens=1e9,
        watts_per_chip=400,
    )
    assert r.feasible
    assert r.time_to_train == pytest.approx(1e9 / r.tokens_per_second)
    # trn1.32xlarge: $21.50/h for 16 chips
    assert r.cost == pytest.approx(r.time_to_train / 3600 * 21.50)
    assert r.energy == pytest.approx(r.time_to_train * 16 * 400)


def test_search_finds_a_70b_plan_on_a_trn2_ultraserver_and_explains_the_rest():
    res = search("llama3-70b", "trn2-ultraserver", global_batch=256, seq_len=4096)
    assert res.best is not None and res.best.feasible
    assert all(a.step_time <= b.step_time for a, b in zip(res.ranked, res.ranked[1:], strict=False))
    counts = res.rejection_counts()
    assert counts.get("out of memory", 0) > 0
    text = res.summary()
    assert "Best by time" in text and "out of memory" in text


def test_405b_does_not_fit_one_trn2_ultraserver_and_the_search_says_why():
    res = search("llama3-405b", "trn2-ultraserver", global_batch=256, seq_len=4096)
    assert res.best is None
    why = res.why_nothing_fits()
    # 16 bytes x 405.9B parameters = 6.49 TB of state
    assert "16 x 405.9B = 6.49 TB" in why
    assert "GiB per chip" in why


@pytest.mark.parametrize(
    ("parallel", "says"),
    [
        (Parallelism(tp=4, pp=1, dp=2), "has 16"),
        (Parallelism(tp=32, pp=1, dp=2), "does not fit the 16-chip NeuronLink domain"),
        (Parallelism(tp=1, pp=3, dp=5), "has 16"),
        (Parallelism(tp=1, pp=1, dp=16, micro_batch=3), "not a multiple"),
    ],
)
def test_impossible_plans_say_why(parallel, says):
    r = plan("llama3-8b", "trn2.48xlarge", parallel, global_batch=64, seq_len=1024)
    assert not r.feasible and any(says in p for p in r.problems)
    assert "not possible" in r.explain()


@pytest.mark.parametrize(
    "call",
    [
        lambda: plan("llama3-8b", "trn2.48xlarge", global_batch=0),
        lambda: plan("llama3-8b", "trn2.48xlarge", global_batch=64, tokens=-1),
        lambda: search("llama3-8b", "trn2.48xlarge", rank_by="vibes"),
        lambda: inference("llama3-8b", "trn2.48xlarge", tp=3),
        lambda: inference("llama3-8b", "trn2.48xlarge", batch=0),
        lambda: inference("llama3-405b", "trn2.48xlarge", tp=1),
    ],
)
def test_impossible_requests_raise(call):
    with pytest.raises(WorkloadError):
        call()


@pytest.mark.parametrize(
    ("system", "tp", "fmt"),
    [("trn2.48xlarge", 8, "bf16"), ("trn3-ultraserver-gen2", 4, "mxfp8_e4m3")],
)
def test_decode_is_never_faster_than_reading_weights_and_kv_from_hbm(system, tp, fmt):
    r = inference("llama3-70b", system, tp=tp, batch=8, prompt=1024, output=128, weight_format=fmt)
    hbm = catalog.system(system).chip.hbm_bandwidth
    floor = r.memory.weights / hbm  # weights alone, per chip, once per token
    assert r.tpot >= floor
    assert r.tpot >= r.tpot_memory_bound
    assert r.ttft > 0 and r.tokens_per_second_per_chip > 0


def test_tokens_per_megawatt_needs_power_and_uses_it():
    r = inference("llama3-8b", "trn2.48xlarge", tp=1, batch=8, prompt=512, output=64)
    assert r.tokens_per_megawatt is None  # no sourced Trainium2 power figure
    r = inference(
        "llama3-8b", "trn2.48xlarge", tp=1, batch=8, prompt=512, output=64, watts_per_chip=500
    )
    assert r.tokens_per_megawatt == pytest.approx(r.tokens_per_second_per_chip / 500e-6)


def test_when_batch_divisibility_blocks_every_split_the_search_says_so_not_memory():
    # 144 chips = 16 x 9: every dp has a factor the 512-sequence batch lacks
    res = search("llama3-70b", "trn3-ultraserver-gen2", global_batch=512, seq_len=4096)
    assert res.best is None
    why = res.why_nothing_fits()
    assert "memory is not what stops them" in why and "global batch 512 is not a multiple" in why
    ok = search("llama3-70b", "trn3-ultraserver-gen2", global_batch=576, seq_len=4096)
    assert ok.best is not None


def test_context_parallelism_splits_activations_and_adds_kv_gathers():
    base = dict(tp=8, pp=1, zero=3, recompute=True)
    one = plan(
        "llama3-70b",
        "trn2-ultraserver",
        Parallelism(dp=8, cp=1, **base),
        global_batch=64,
        seq_len=16384,
    )
    two = plan(
        "llama3-70b",
        "trn2-ultraserver",
        Parallelism(dp=4, cp=2, **base),
        global_batch=64,
        seq_len=16384,
    )
    assert two.parallel.chips == 64
    # the sequence is split in two: each layer's stored input halves
    m = scale.model("llama3-70b")
    assert one.memory.activations - two.memory.activations == pytest.approx(
        2 * 8192 * 8192 / 8 * m.layers + 8192 * 8192 * (34 + 5 * 64 * 16384 / 8192) / 8, rel=1e-9
    )
    assert one.step["context parallel"] == 0 and two.step["context parallel"] > 0
    with pytest.raises(WorkloadError, match="does not divide the sequence"):
        scale.training_memory(m, cp=3, seq_len=4096)
