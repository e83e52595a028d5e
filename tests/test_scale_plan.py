"""Plans, search and inference: standard results, fabric-sourced communication, clear refusals."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trnlab import catalog, fabric, scale
from trnlab.scale import Parallelism, WorkloadError, inference, plan, search
from trnlab.scale import _plan as plan_module
from trnlab.scale._memory_bound import layer_traffic

GIB = 2**30


# A model whose output head is negligible, so every pipeline stage costs the same.
EVEN = scale.ModelSpec("even", 32, 4096, 32, 8, 14336, 8, 2048, source="test")


@pytest.mark.parametrize(("p", "v"), [(4, 1), (4, 2), (8, 4)])
def test_pipeline_bubble_is_p_minus_1_over_v_slots(p, v):
    # Narayanan et al. 2021: plain 1F1B idles (p-1)/(m+p-1) of the step; the interleaved
    # schedule with v chunks per stage cuts the bubble to (p-1)/v micro-batch slots.
    gb = 64
    r = plan(EVEN, "trn2.48xlarge", Parallelism(tp=2, pp=p, dp=16 // (2 * p), recompute="full",
             virtual_stages=v), global_batch=gb, seq_len=2048)  # fmt: skip
    assert r.feasible, r.problems
    m = r.micro_batches
    stage = ("compute", "memory-bound kernels", "tensor parallel", "pipeline sends")
    per_slot = sum(r.step[k] for k in stage) / m
    assert r.step["pipeline bubble"] == pytest.approx((p - 1) / v * per_slot, rel=1e-3)
    if v == 1:
        once = ("data parallel (exposed)", "ZeRO-3 gathers (exposed)", "optimizer step")
        busy = r.step_time - sum(r.step[k] for k in once)
        assert r.step["pipeline bubble"] / busy == pytest.approx((p - 1) / (m + p - 1), rel=1e-3)


def test_uneven_stages_set_the_pace_by_the_slowest_and_fill_with_the_rest():
    # Llama 3 405B on 16 stages: 7 + 14 x 8 + 7 layers; a micro-batch takes the 8-layer
    # stage's time t8, the fill and drain pass through every other stage once.
    sysobj = catalog.cluster("trn2-ultraserver", 4)
    r = plan("llama3-405b", sysobj, Parallelism(tp=4, pp=16, dp=4, recompute="full",
             zero=1), global_batch=64, seq_len=8192)  # fmt: skip
    assert r.stages == (7,) + (8,) * 14 + (7,)
    assert not any("divide" in x for x in r.problems)


def test_communication_comes_from_the_fabric_on_the_groups_the_axes_place(monkeypatch):
    calls = []

    class Fixed:
        time = 1e-3

    def fake(op, nbytes, system=None, algorithm="auto", **kw):
        calls.append((op, nbytes, system.chips, system.name))
        return Fixed()

    monkeypatch.setattr(fabric, "collective", fake)
    plan_module._TIMES.clear()
    try:
        r = plan(
            "llama3-8b",
            "trn2.48xlarge",
            Parallelism(tp=4, pp=1, dp=4, sequence_parallel=False),
            global_batch=64,
            seq_len=1024,
        )
    finally:
        plan_module._TIMES.clear()
    # 4 tensor-parallel all-reduces per layer per micro-batch, each 1 ms by the fake fabric
    micro_batches = 64 // 4
    assert r.step["tensor parallel"] == pytest.approx(micro_batches * 32 * 4 * 1e-3)
    # the tp group is one ring of the 4x4 torus; the dp group runs along the other axis
    tp_calls = [c for c in calls if c[0] == "all_reduce" and c[1] == 1024 * 4096 * 2]
    assert tp_calls and tp_calls[0][2] == 4 and "(4)" in tp_calls[0][3]
    # ZeRO-1 over the 4 replicas: the gradients reduce-scattered, the updated weights gathered
    rs = [c for c in calls if c[0] == "reduce_scatter"]
    ag = [c for c in calls if c[0] == "all_gather"]
    assert rs and ag and rs[0][2] == ag[0][2] == 4
    assert rs[0][1] == ag[0][1]  # BF16 gradients and BF16 weights: the same bytes


def test_tp_groups_stay_in_an_instance_and_dp_groups_cross_the_slow_axis():
    t = fabric.group("trn2-ultraserver", 8, 1)  # tp 8: a 4-ring and a pair, 128 GB/s links
    dp = fabric.group("trn2-ultraserver", 4, 16)  # dp 4 at stride 16: the 64 GB/s rings
    eff = catalog.table("collectives")["neuronlink_efficiency"].value
    assert t.axis_bandwidth == pytest.approx((eff * 128e9, eff * 128e9))
    assert dp.axis_bandwidth == pytest.approx((eff * 64e9,))


def test_efa_and_switch_ports_count_once_per_direction():
    # A data-parallel all-reduce of 1 GiB over 4 instances, one chip each: a ring over EFA
    # ports at 25 GB/s each way per chip cannot beat 2 (n-1)/n S / 25 GB/s.
    c = catalog.cluster("trn2.48xlarge", 4)
    t = scale.collective_time("all_reduce", 2**30, c, 4, 16)
    assert t >= 2 * 3 / 4 * 2**30 / 25e9
    # On a switch, a group's chips each have one port: no ring doubles it.
    s = scale.collective_time("all_reduce", 2**30, catalog.system("trn3-ultraserver-gen2"), 8)
    eff = catalog.table("collectives")["neuronlink_efficiency"].value
    assert s >= 2 * 7 / 8 * 2**30 / (eff * 1.28e12)


def test_dp_reduction_hides_only_under_the_last_micro_batch_backward():
    kw = dict(global_batch=256, seq_len=2048)
    base = Parallelism(tp=8, pp=1, dp=2, recompute="none", zero=0)  # a plain all-reduce
    r = plan("llama3-8b", "trn2.48xlarge", base, **kw)
    exposed = plan("llama3-8b", "trn2.48xlarge", base, overlap_dp=False, **kw)
    t_dp = exposed.step["data parallel (exposed)"]
    # one micro-batch's backward: 2/3 of its matmuls, and its memory-bound kernels less the
    # forward ones (32 layers, 2,048 tokens per chip)
    traffic = layer_traffic(scale.model("llama3-8b"), tp=8, seq_len=2048)
    fwd_mem = 2048 * 32 * traffic.forward / catalog.chip("trn2").hbm_bandwidth
    bwd = (r.step["compute"] * 2 / 3 + r.step["memory-bound kernels"]) / r.micro_batches
    bwd -= fwd_mem
    assert r.step["data parallel (exposed)"] == pytest.approx(
        max(t_dp - bwd, t_dp / math.ceil(2 * 8.03e9 / 8 / (25 * 2**20))), rel=0.02
    )
    # more micro-batches do not hide more of it
    more = plan("llama3-8b", "trn2.48xlarge", base, global_batch=1024, seq_len=2048)
    assert more.step["data parallel (exposed)"] == pytest.approx(
        r.step["data parallel (exposed)"], rel=1e-9
    )


def test_zero1_reduce_scatters_gradients_at_their_width_and_gathers_bf16_weights(monkeypatch):
    """ZeRO-1: the gradients reduce-scattered (FP32 ones, as Megatron-LM reduces BF16 runs'
    gradients, move twice the bytes), then the updated weights all-gathered in BF16, exposed
    unless they hide under the next step's first forward (--overlap-param-gather)."""
    calls = []

    class Fixed:
        time = 1e-3

    def fake(op, nbytes, system=None, algorithm="auto", **kw):
        calls.append((op, nbytes))
        return Fixed()

    monkeypatch.setattr(fabric, "collective", fake)
    plan_module._TIMES.clear()
    runs = {}
    try:
        for fp32 in (False, True):
            for gather in (False, True):
                calls.clear()
                plan_module._TIMES.clear()  # each run calls the fabric afresh
                par = Parallelism(tp=4, dp=4, zero=1, megatron_state=fp32, sequence_parallel=False,
                                  overlap_param_gather=gather)  # fmt: skip
                r = plan("llama3-8b", "trn2.48xlarge", par, global_batch=64, seq_len=1024,
                         overlap_dp=False)  # fmt: skip
                rs = [b for op, b in calls if op == "reduce_scatter"]
                ag = [b for op, b in calls if op == "all_gather"]
                runs[fp32, gather] = (r.step["data parallel (exposed)"], rs, ag)
    finally:
        plan_module._TIMES.clear()
    (t16, rs16, ag16), (_, rs32, ag32) = runs[False, False], runs[True, False]
    assert rs32 == [2 * b for b in rs16]  # FP32 gradients: twice the bytes
    assert ag32 == ag16 == rs16  # the weights stay BF16
    # every reduce-scatter and all-gather exposed (1 ms each, fake), nothing else
    assert t16 == pytest.approx(1e-3 * (len(rs16) + len(ag16)))
    t_gather = runs[False, True][0]
    assert t_gather < t16  # the gather hides under a forward far longer than 1 ms...
    assert t_gather > 1e-3 * len(rs16)  # ...all but its last bucket


def test_zero3_gathers_weights_every_micro_batch():
    kw = dict(seq_len=2048)
    p3 = Parallelism(tp=1, pp=1, dp=16, zero=3, recompute="full")
    small = plan("llama3-8b", "trn2.48xlarge", p3, global_batch=16, **kw)
    large = plan("llama3-8b", "trn2.48xlarge", p3, global_batch=64, **kw)
    assert large.micro_batches == 4 * small.micro_batches
    for key in ("ZeRO-3 gathers (exposed)", "data parallel (exposed)"):
        assert large.step[key] == pytest.approx(4 * small.step[key], rel=1e-9)
    kept = plan("llama3-8b", "trn2.48xlarge", replace(p3, reshard=False), global_batch=16, **kw)
    assert kept.step["ZeRO-3 gathers (exposed)"] < small.step["ZeRO-3 gathers (exposed)"]
    assert kept.memory.total > small.memory.total


def test_recompute_modes_trade_memory_for_flops():
    runs = {
        mode: plan(
            "llama3-8b",
            "trn2.48xlarge",
            Parallelism(tp=2, dp=8, recompute=mode, flash_attention=False),  # 8 ranks, 8 KV
            global_batch=64,
            seq_len=4096,
        )
        for mode in ("none", "selective", "full")
    }
    act = {k: r.memory.activations for k, r in runs.items()}
    assert act["full"] < act["selective"] < act["none"]
    assert runs["none"].hfu == pytest.approx(runs["none"].mfu)
    m = scale.model("llama3-8b")
    for mode in ("selective", "full"):  # HFU counts the rerun FLOPs, MFU does not
        ratio = m.training_flops_per_token(mode, 4096) / m.model_flops_per_token(4096)
        assert runs[mode].hfu == pytest.approx(runs[mode].mfu * ratio)
        assert ratio > 1
    assert Parallelism(recompute=True).recompute == "full"
    assert Parallelism(recompute=False).recompute == "none"


def test_mfu_counts_model_flops_against_the_published_peak():
    r = plan(
        "llama3-70b",
        "trn2-ultraserver",
        Parallelism(tp=8, pp=4, dp=2, recompute=True),
        global_batch=256,
        seq_len=4096,
    )
    peak = 64 * catalog.chip("trn2").peak_flops("bf16")
    m = scale.model("llama3-70b")
    model_flops = 256 * 4096 * (6 * m.matmul_params + 12 * 80 * 64 * 128 * 4096)
    assert r.mfu == pytest.approx(model_flops / (r.step_time * peak))
    # HFU counts the rerun forward and the K and V projections copied from 8 KV heads to the
    # 32 ranks of tp=8 at 4 logical NeuronCores per chip (forward, backward, rerun: 4 passes)
    copies = 2 * (2 * 8192 * 128 * (32 - 8)) * 80 * 4
    assert r.hfu == pytest.approx(r.mfu * (m.training_flops_per_token(True, 4096) + copies)
                                  / m.model_flops_per_token(4096))  # fmt: skip
    assert 0 < r.mfu < r.hfu < 1
    assert "embedding lookups are not matmuls" in r.convention
    fp8 = plan("llama3-70b", "trn2-ultraserver", Parallelism(tp=8, pp=4, dp=2, recompute=True),
               global_batch=256, seq_len=4096, dtype="fp8")  # fmt: skip
    assert fp8.mfu == pytest.approx(
        fp8.model_flops_per_step / (fp8.step_time * 64 * catalog.chip("trn2").peak_flops("fp8"))
    )


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
        (Parallelism(tp=3, pp=1, dp=5), "must divide the 32"),
        (Parallelism(tp=1, pp=3, dp=5), "has 16"),
        (Parallelism(tp=1, pp=1, dp=16, micro_batch=3), "not a multiple"),
        (Parallelism(tp=1, pp=1, dp=16, zero=3, micro_batch=64), "GiB per chip"),
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
        lambda: plan("llama3-8b", "trn2.48xlarge", global_batch=64, tokens=float("nan")),
        lambda: plan("llama3-8b", "trn2.48xlarge", global_batch=64.5),
        lambda: plan("llama3-8b", "trn2.48xlarge", seq_len=0),
        lambda: plan("llama3-8b", "trn2.48xlarge", usable_hbm=0),
        lambda: plan("llama3-8b", "trn2.48xlarge", usable_hbm=1.5),
        lambda: plan("llama3-8b", "trn2.48xlarge", usable_hbm=float("nan")),
        lambda: plan("llama3-8b", "trn2.48xlarge", price_per_chip_hour=-1.0),
        lambda: plan("llama3-8b", "trn2.48xlarge", watts_per_chip=float("inf")),
        lambda: plan("llama3-8b", "trn2.48xlarge", dtype="fp7"),
        lambda: plan("llama3-8b", "trn1.32xlarge", dtype="mxfp8"),
        lambda: Parallelism(micro_batch=0),
        lambda: Parallelism(tp=-2),
        lambda: Parallelism(recompute="sometimes"),
        lambda: Parallelism(zero=5),
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
    # micro-batches of 3 sequences never divide a 64-sequence batch, whatever dp is
    res = search("llama3-8b", "trn2.48xlarge", global_batch=64, seq_len=2048,
                 micro_batches=(3,))  # fmt: skip
    assert res.best is None
    why = res.why_nothing_fits()
    assert "memory is not what stops them" in why and "global batch 64 is not a multiple" in why
    ok = search("llama3-8b", "trn2.48xlarge", global_batch=64, seq_len=2048, micro_batches=(2,))
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
    # stored inputs 2 (s/cp) b h / t per layer, plus one layer rerun: 34 (s/cp) b h / t with
    # FlashAttention (no scores): halving s/cp removes half of each
    assert one.memory.activations - two.memory.activations == pytest.approx(
        8192 * 8192 * (2 * m.layers + 34) / 8, rel=1e-9
    )
    assert one.memory.logits == pytest.approx(2 * two.memory.logits)
    assert one.step["context parallel"] == 0 and two.step["context parallel"] > 0
    with pytest.raises(WorkloadError, match="does not divide the sequence"):
        scale.training_memory(m, cp=3, seq_len=4096)


_bad_numbers = st.one_of(
    st.just(float("nan")), st.just(float("inf")), st.just(-float("inf")),
    st.floats(max_value=0.0, allow_nan=False), st.integers(max_value=0), st.just(True),
)  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(field=st.sampled_from(["global_batch", "seq_len", "tokens", "price_per_chip_hour",
                              "watts_per_chip", "usable_hbm"]), value=_bad_numbers)  # fmt: skip
def test_bad_numbers_are_refused_with_a_teaching_error_never_a_crash(field, value):
    with pytest.raises(WorkloadError) as err:
        plan("llama3-8b", "trn2.48xlarge", **{field: value})
    assert repr(value) in str(err.value) or str(value) in str(err.value)


@settings(max_examples=40, deadline=None)
@given(value=_bad_numbers)
def test_bad_collective_sizes_are_refused(value):
    if value == 0 and not isinstance(value, bool):
        return  # zero bytes is a valid, empty collective
    with pytest.raises(fabric.FabricError):
        fabric.collective("all_reduce", value, "trn2.48xlarge")


def test_a_search_simulates_the_large_gemm_once_per_chip_and_format():
    """The NeuronCore kernel behind a chip's GEMM rate does not depend on the GEMM's shape
    (only the roofline applied after it does): a search meeting hundreds of shapes simulates
    it once, not once per shape (10 s for a search on one trn1.32xlarge when it did)."""
    _plan = plan_module
    _plan._large_gemm_rate.cache_clear()
    _plan._achieved.cache_clear()
    r = scale.search("llama3-8b", "trn1.32xlarge", global_batch=512, seq_len=4096)
    shapes = _plan._achieved.cache_info().currsize
    assert len(r.ranked) + len(r.rejected) > 100 and shapes > 50
    assert _plan._large_gemm_rate.cache_info().misses == 1, _plan._large_gemm_rate.cache_info()
    # and a shape's rate is the large-GEMM rate held to that shape's roofline, never above it
    large, _ = scale.achieved_flops_per_chip("trn1", "bf16")
    thin, where = scale.achieved_flops_per_chip("trn1", "bf16", (1, 4096, 4096))
    assert thin < large and "held to the" in where


def test_kv_copies_for_more_ranks_than_kv_heads_compute_like_real_heads():
    """Llama 3 8B (8 KV heads) at tp=16 on Trainium runs 32 ranks: NxD Training copies K and V
    to 32 heads, so its layers compute what a model with 32 real KV heads computes, and take as
    long; at tp=4 (8 ranks) nothing is copied."""
    gqa = scale.model("llama3-8b")
    mha = replace(gqa, name="llama3-8b-32kv", kv_heads=32)
    kw = dict(global_batch=64, seq_len=4096)
    par = Parallelism(tp=16, dp=2, recompute="selective")
    two = catalog.cluster("trn1.32xlarge", 2)
    a, b = (plan(m, two, par, **kw) for m in (gqa, mha))
    assert a.hardware_flops_per_step == pytest.approx(b.hardware_flops_per_step)
    assert a.model_flops_per_step < b.model_flops_per_step  # copies are not model FLOPs
    assert a.step_time == pytest.approx(b.step_time, rel=0.02)
    small = Parallelism(tp=4, dp=8, recompute="selective")
    c = plan(gqa, two, small, **kw)
    assert c.hfu == pytest.approx(
        c.mfu * gqa.training_flops_per_token("selective", 4096) / gqa.model_flops_per_token(4096)
    )
