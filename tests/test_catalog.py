"""The chip catalogue: sources, published totals, computed aggregates, teaching errors.

Expected totals are the vendor's printed figures (from the issue and the seed articles), typed
here independently of the data file, with the tolerance their printing implies.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trnlab import catalog
from trnlab.catalog import CatalogError, Figure

PF, TB = 1e15, 1e12
GIB = 2**30


def _all_figures() -> list[Figure]:
    cat = catalog.load()
    figs: list[Figure] = []
    for core in cat.cores.values():
        figs += [*core.figures.values(), *core.tensor_rate.values(), *core.published_peak.values()]
    for chip in cat.chips.values():
        figs += list(chip.all_figures().values())
        figs += [f for _, f in chip.published_sparse]
    for system in cat.systems.values():
        figs += [*system.figures.values(), *system.published.values()]
    return figs


def test_every_figure_has_a_source():
    figs = _all_figures()
    assert len(figs) > 150
    missing = [f.name for f in figs if not f.sources]
    assert missing == []
    for f in figs:
        for alt in f.alternatives:
            assert alt.sources, f"{f.name}: alternative {alt.label} has no source"


def test_a_figure_without_source_is_rejected():
    with pytest.raises(CatalogError, match="at least one source"):
        catalog._figures.parse_figure("x.y", {"value": 1, "unit": "B"}, catalog.sources())
    with pytest.raises(CatalogError, match="unknown source"):
        catalog._figures.parse_figure("x.y", {"value": 1, "sources": ["nope"]}, catalog.sources())


def test_disputed_figures_say_which_value_is_used_and_why():
    disputed = [f for f in _all_figures() if f.disputed and not f.computed]
    names = {f.name for f in disputed}
    # The disagreements the facts sheet lists must all be on record.
    for expected in [
        "trn1.hbm_bandwidth",
        "trn2.hbm_bytes",
        "trn3.neuronlink_bandwidth",
        "trn2.cc_cores",
        "trn3.cc_cores",
        "trn3.hbm_bandwidth",
    ]:
        assert expected in names
    for f in disputed:
        assert sum(a.used for a in f.alternatives) == 1
        assert f.why
        assert f.value == next(a.value for a in f.alternatives if a.used)


# Published totals, as printed by the vendor, with the rounding of the print.
PUBLISHED = [
    ("trn2.48xlarge", lambda s: s.peak_flops("fp8") / PF, 20.8, 0.05),
    # 83.2 = 4 x 20.8: the sparse figure carries the rounding of 20.8 (x4).
    ("trn2.48xlarge", lambda s: s.peak_flops("fp8", sparse=True) / PF, 83.2, 0.2),
    # AWS multiplies GiB per chip and prints decimal TB: 16 x 96 GiB -> "1.5 TB".
    ("trn2.48xlarge", lambda s: s.hbm_bytes / GIB / 1000, 1.5, 0.05),
    ("trn2.48xlarge", lambda s: s.hbm_bandwidth / TB, 46.4, 0.05),
    ("trn2-ultraserver", lambda s: s.peak_flops("fp8") / PF, 83, 1),
    ("trn2-ultraserver", lambda s: s.hbm_bytes / GIB / 1000, 6, 0.5),
    ("trn2-ultraserver", lambda s: s.hbm_bandwidth / TB, 185, 1),
    ("trn3-ultraserver-gen1", lambda s: s.peak_flops("mxfp8") / PF, 161, 1),
    ("trn3-ultraserver-gen1", lambda s: s.hbm_bytes / GIB / 1000, 9.2, 0.1),
    ("trn3-ultraserver-gen1", lambda s: s.hbm_bandwidth / TB, 314, 1),
    ("trn3-ultraserver-gen2", lambda s: s.peak_flops("mxfp8") / PF, 362, 1),
    ("trn3-ultraserver-gen2", lambda s: s.hbm_bytes / GIB / 1000, 20.7, 0.1),
    ("trn3-ultraserver-gen2", lambda s: s.hbm_bandwidth / TB, 706, 1),
    ("trn1.32xlarge", lambda s: s.peak_flops("bf16") / PF, 3, 0.5),
    ("trn1.32xlarge", lambda s: s.hbm_bytes / GIB, 512, 0.5),
]


@pytest.mark.parametrize(("name", "compute", "printed", "rounding"), PUBLISHED)
def test_published_totals_are_reproduced_from_chip_figures(name, compute, printed, rounding):
    value = compute(catalog.system(name))
    assert abs(value - printed) <= rounding, f"{name}: computed {value:.4g}, printed {printed}"


def test_trn3_vs_trn2_ultraserver_compute_ratio_is_about_4_4x():
    trn3 = catalog.system("trn3-ultraserver-gen2").peak_flops("mxfp8")
    trn2 = catalog.system("trn2-ultraserver").peak_flops("fp8")
    assert round(trn3 / trn2, 1) == 4.4


def test_trn1_32xlarge_bandwidth_mismatch_is_documented_not_hidden():
    """AWS prints 9.8 TB/s for 16 Trainium chips; 16 x 820 GB/s is 13.1 TB/s. The catalogue
    keeps 820 GB/s per chip (docs) and records the instance-implied 0.61 TB/s per chip."""
    s = catalog.system("trn1.32xlarge")
    assert s.hbm_bandwidth / TB == pytest.approx(16 * 0.82)
    row = next(r for r in s.compare() if r.figure == "hbm_bandwidth")
    assert not row.agrees
    assert row.ratio == pytest.approx(13.12 / 9.8, rel=1e-3)
    alts = {a.label: a.value for a in catalog.figure("trn1.hbm_bandwidth").alternatives}
    assert alts["instance/16"] == pytest.approx(9.8e12 / 16)


def test_compare_agrees_everywhere_except_the_documented_mismatch():
    disagreements = [
        (s.key, r.figure) for s in catalog.systems() for r in s.compare() if not r.agrees
    ]
    assert disagreements == [("trn1.32xlarge", "hbm_bandwidth")]


def test_system_totals_are_chip_count_times_chip_figures():
    for s in catalog.systems():
        assert s.hbm_bytes == s.chips * s.chip.hbm_bytes
        assert s.hbm_bandwidth == pytest.approx(s.chips * s.chip.hbm_bandwidth)
        for d in s.chip.dtypes:
            assert s.peak_flops(d) == pytest.approx(s.chips * s.chip.peak_flops(d))


def test_ultraserver_chip_counts_are_built_not_typed():
    assert catalog.system("trn2-ultraserver").chips == 4 * 16
    assert catalog.system("trn3-ultraserver-gen1").chips == 16 * 4
    assert catalog.system("trn3-ultraserver-gen2").chips == 36 * 4
    assert catalog.system("trn2-ultraserver").figures["chips"].computed


def test_core_peak_follows_from_the_pe_array_and_clock():
    v2 = catalog.core("v2")
    # 128 x 128 PEs x 2 FLOP x 2.8 GHz = 91.75 TFLOPS (facts sheet check)
    assert v2.peak_flops("bf16") == pytest.approx(128 * 128 * 2 * 2.8e9)
    for core in catalog.cores():
        for d, pub in core.published_peak.items():
            assert core.peak_flops(d) == pytest.approx(pub.value, rel=0.02), (core.name, d)


def test_chip_peaks_keep_the_core_derived_value_beside_the_published_rating():
    fig = catalog.chip("trn2").peak_figure("bf16")
    values = {a.label: a.value for a in fig.alternatives}
    assert fig.value == 667e12
    assert values["cores x per-core (trnlab)"] == pytest.approx(8 * 128 * 128 * 2 * 2.4e9)
    # The derived clock a learner computes in lab 01: 667 TF / (8 x 128 x 128 x 2) = 2.54 GHz.
    assert fig.value / (8 * 128 * 128 * 2) / 1e9 == pytest.approx(2.545, abs=0.001)


def test_sbuf_per_chip_is_computed_from_cores():
    assert catalog.chip("trn1").sbuf_bytes == 2 * 24 * 2**20
    assert catalog.chip("trn2").sbuf_bytes == 8 * 28 * 2**20
    assert catalog.chip("trn3").sbuf_bytes == 8 * 32 * 2**20
    assert catalog.core("v3").psum_bank_bytes == 2048


def test_sparse_peaks_follow_the_sparsity_rules():
    assert catalog.chip("trn2").peak_flops("fp8", sparse=True) == 4 * 1299e12
    assert catalog.chip("h100").peak_flops("bf16", sparse=True) == pytest.approx(2 * 989.4e12)
    with pytest.raises(CatalogError, match="no structured sparsity"):
        catalog.chip("trn1").peak_flops("bf16", sparse=True)
    with pytest.raises(CatalogError, match="fp16, bf16, tf32"):
        catalog.chip("trn3").peak_flops("mxfp8", sparse=True)
    with pytest.raises(CatalogError, match="no published structured-sparsity rate") as err:
        catalog.chip("h200").peak_flops("bf16", sparse=True)
    assert "Trainium2" not in str(err.value)  # a GPU is not told about NeuronCore-v3


def test_trainium3_plain_fp8_runs_at_the_bf16_rate_and_keeps_the_chip_page_reading():
    """The NKI architecture guide gives non-MXFP8 input the BF16 data-path width (2x128
    elements per cycle) and MXFP8 8x128; the chip page's Trn2-vs-Trn3 table prints the MX rate
    as 'FP8'. The model uses the guide and keeps the other value on record."""
    trn3 = catalog.chip("trn3")
    assert trn3.peak_flops("fp8") == trn3.peak_flops("bf16") == pytest.approx(671e12)
    assert trn3.peak_flops("mxfp8") == pytest.approx(2517e12)
    fig = catalog.figure("trn3.peak.fp8")
    assert {a.label: a.value for a in fig.alternatives}["chip-page table"] == 2517e12
    rate = trn3.core.tensor_rate
    assert rate["fp8"].value == 1 and rate["mxfp8"].value == 4
    assert {a.label for a in rate["fp8"].alternatives} == {"arch-guide", "chip-page table"}


def test_announced_trainium4_has_targets_only():
    trn4, trn3 = catalog.chip("trn4"), catalog.chip("trn3")
    assert trn4.status == "announced"
    # "3x the FP8 processing power": AWS's FP8 for Trainium3 is its MXFP8 rate (2.52 PF)
    assert trn4.peak_flops("mxfp8") == pytest.approx(3 * 2.517e15)
    assert trn4.hbm_bandwidth == pytest.approx(4 * trn3.hbm_bandwidth)
    with pytest.raises(CatalogError, match="announced"):
        _ = trn4.hbm_bytes
    with pytest.raises(CatalogError, match="announced"):
        trn4.peak_flops("bf16")


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: catalog.chip("trn5"), ["unknown chip", "trn1", "trn2", "trn3", "h100"]),
        (lambda: catalog.system("trn2.96xlarge"), ["unknown system", "trn2.48xlarge"]),
        (lambda: catalog.core("v9"), ["unknown NeuronCore", "v2", "v4"]),
        (lambda: catalog.chip("trn2").peak_flops("mxfp8"), ["NeuronCore-v4", "fp8", "bf16"]),
        (lambda: catalog.chip("trn1").peak_flops("mxfp4"), ["no mxfp4", "fp32", "int8"]),
        (lambda: catalog.chip("trn2").peak_flops("int8"), ["no source publishes", "fp8"]),
        (lambda: catalog.chip("h100").peak_flops("mxfp4"), ["no mxfp4", "fp8"]),
        (lambda: catalog.chip("trn2").peak_flops("fp6"), ["unknown data type", "mxfp4"]),
        (lambda: catalog.figure("trn9.hbm_bytes"), ["cannot find", "trn2.48xlarge"]),
        (lambda: catalog.cluster("trn3-ultraserver-gen2", 10_000), ["1,000,000", "6,944"]),
    ],
)
def test_errors_name_what_exists(call, words):
    with pytest.raises(CatalogError) as err:
        call()
    for w in words:
        assert w in str(err.value)


def test_mx_gain_over_plain_fp8_is_trainium3s_alone():
    trn3 = catalog.chip("trn3")
    assert trn3.mx_gain_over_fp8() == pytest.approx(2517e12 / 671e12)  # the chip page's rates
    # no MX at all (Trainium2), or MX at the FP8 rate (B200): nothing to gain
    assert catalog.chip("trn2").mx_gain_over_fp8() is None
    assert catalog.chip("b200").mx_gain_over_fp8() is None


def test_every_price_says_whether_it_is_a_list_price_or_an_estimate():
    from trnlab.catalog._chips import PRICE_BASES

    priced = [c for c in catalog.chips() if c.price_per_chip_hour is not None]
    assert {c.key for c in priced} >= {"trn2", "h100", "h200"}
    assert {c.price_basis for c in priced} == set(PRICE_BASES)  # both kinds are on record
    # the basis agrees with what the source note says (an instance's on-demand list price)
    for c in priced:
        on_demand = "on demand" in c.figure("price_per_chip_hour").note
        assert (c.price_basis == "on-demand") == on_demand, c.key
    unmarked = dataclasses.replace(
        catalog.chip("h200"),
        figures={
            **catalog.chip("h200").figures,
            "price_per_chip_hour": dataclasses.replace(
                catalog.chip("h200").figure("price_per_chip_hour"), extra={}
            ),
        },
    )
    with pytest.raises(catalog.CatalogError, match="must say which of"):
        _ = unmarked.price_basis
    assert catalog.chip("trn3").price_basis is None  # no price, nothing to mark


def test_names_and_aliases():
    assert catalog.chip("Trainium2") is catalog.chip("trn2")
    assert catalog.chip(" TRN3 ") is catalog.chip("trn3")
    assert catalog.system("trn2u.48xlarge") is catalog.system("trn2.48xlarge")
    assert catalog.system("Trn3 UltraServer Gen2").chips == 144
    assert catalog.chip("trn2").peak_flops("bfloat16") == catalog.chip("trn2").peak_flops("bf16")
    assert [c.key for c in catalog.chips("gpu")] == ["h100", "b200", "a100", "h200", "gb200"]


def test_any_figure_by_dotted_path_with_value_unit_and_sources():
    f = catalog.figure("trn2.48xlarge.hbm_bandwidth")
    assert f.computed and f.unit == "B/s" and f.value == pytest.approx(46.4e12)
    assert "ndoc-trn2-chip" in f.source_keys
    assert catalog.figure("v3.tensor_clock").value == 2.4e9
    assert catalog.figure("trn2.peak_sparse.fp8").value == pytest.approx(5.196e15)
    text = catalog.figure("trn1.hbm_bandwidth").describe()
    assert "sources disagree" in text and "seed-002" in text and "why" in text


def test_clusters_scale_chips_and_network():
    base = catalog.system("trn3-ultraserver-gen2")
    c = catalog.cluster(base, 100)
    assert c.chips == 14_400
    assert c.network_bandwidth == pytest.approx(100 * base.network_bandwidth)
    assert c.peak_flops("mxfp8") == pytest.approx(100 * base.peak_flops("mxfp8"))
    assert c.topology == "efa"


def test_stated_tolerance_reads_the_printed_rounding():
    assert catalog.stated_tolerance("20.8 PFLOPS") == pytest.approx(0.05 / 20.8)
    assert catalog.stated_tolerance("~185 TB/s") == pytest.approx(1 / 185)
    assert catalog.stated_tolerance("1,600 Gbps") == pytest.approx(0.5 / 1600)
    with pytest.raises(CatalogError):
        catalog.stated_tolerance("about a lot")


_chips_with_peaks = [(c.key, d) for c in catalog.chips() for d in c.dtypes]


@given(pair=st.sampled_from(_chips_with_peaks), n=st.integers(1, 4096))
def test_peaks_are_positive_finite_and_scale_with_chip_count(pair, n):
    chip_key, d = pair
    chip = catalog.chip(chip_key)
    peak = chip.peak_flops(d)
    assert math.isfinite(peak) and peak > 0
    base = catalog.system("trn1.2xlarge")
    if chip_key == "trn1":
        assert catalog.cluster(base, n).peak_flops(d) == pytest.approx(n * peak)
    try:
        assert chip.peak_flops(d, sparse=True) >= peak
    except CatalogError as err:
        assert "sparsity" in str(err) or "announced" in str(err)


def test_topic_files_merge_but_never_repeat_a_figure():
    from trnlab.catalog._load import _merge

    base = {"cores": {"v2": {"pe_rows": {"value": 128, "sources": ["x"]}}}}
    _merge(base, {"cores": {"v2": {"dma_queues": {"value": 16, "sources": ["x"]}}}}, "a.toml")
    assert set(base["cores"]["v2"]) == {"pe_rows", "dma_queues"}
    with pytest.raises(CatalogError, match="defined twice"):
        _merge(base, {"cores": {"v2": {"pe_rows": {"value": 64, "sources": ["y"]}}}}, "b.toml")


def test_each_sparsity_pattern_speeds_up_by_m_over_n_capped_at_the_best():
    trn2 = catalog.chip("trn2")
    dense = trn2.peak_flops("bf16")
    # AWS: 4:16 gives up to 4x, 4:12 3x, 4:8 2x
    assert trn2.peak_flops("bf16", pattern="4:16") == pytest.approx(4 * dense)
    assert trn2.peak_flops("bf16", pattern="4:12") == pytest.approx(3 * dense)
    assert trn2.peak_flops("bf16", pattern="4:8") == pytest.approx(2 * dense)
    assert trn2.peak_flops("bf16", pattern="1:2") == pytest.approx(2 * dense)
    assert set(trn2.sparsity_patterns) == {"4:16", "4:12", "4:8", "2:8", "2:4", "1:4", "1:2"}
    with pytest.raises(CatalogError, match="does not accelerate '3:7'"):
        trn2.peak_flops("bf16", pattern="3:7")
    with pytest.raises(CatalogError, match="no structured sparsity"):
        catalog.chip("trn1").peak_flops("bf16", pattern="2:4")
    assert catalog.chip("h100").peak_flops("fp8", pattern="2:4") == pytest.approx(2 * 1978.9e12)


def test_frameworks_run_one_tensor_parallel_rank_per_logical_neuroncore():
    """TP=32 over a trn1.32xlarge's 16 chips; LNC=2 (Trainium2's default) exposes 64 NeuronCores
    on a trn2.48xlarge; a GPU is one rank."""
    assert catalog.chip("trn1").tp_ranks * 16 == 32
    trn2 = catalog.chip("trn2")
    assert trn2.lnc == 2 and trn2.tp_ranks * 16 == 64
    assert catalog.chip("h100").tp_ranks == 1
    assert catalog.chip("trn3").figures["lnc"].extra.get("assumption")
