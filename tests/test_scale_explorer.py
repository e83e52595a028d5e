"""ScaleModel (model) and ScaleExplorer (view), without a browser."""

from __future__ import annotations

import re
import threading

import pytest

from trnlab import catalog, scale
from trnlab.widgets import ScaleExplorer, ScaleModel


@pytest.fixture
def model():
    return ScaleModel(
        model="llama3-8b", system="trn2.48xlarge", tp=4, pp=1, global_batch=64, seq_len=2048
    )


def test_the_model_plans_the_job_it_describes(model):
    r = model.result
    assert r.feasible and r.system.chips == 16 and r.parallel.dp == 4
    direct = scale.plan("llama3-8b", "trn2.48xlarge", r.parallel, global_batch=64, seq_len=2048)
    assert r.step_time == pytest.approx(direct.step_time)
    stack = model.memory_stack()
    assert sum(
        stack[k] for k in ("weights", "gradients", "optimizer", "activations")
    ) == pytest.approx(r.memory.total)
    assert "MFU" in model.summary() and "days" in model.summary()


def test_clusters_multiply_the_system(model):
    model.set(system="trn2-ultraserver", count=4, tp=8, pp=1, global_batch=1024)
    assert model.result.system.chips == 4 * 64
    assert model.result.parallel.dp == 32


def test_auto_uses_the_search_best(model):
    model.set(auto=True)
    best = scale.search("llama3-8b", "trn2.48xlarge", global_batch=64, seq_len=2048).best
    assert model.result.step_time == pytest.approx(best.step_time)


def test_other_chips_at_the_same_count_scale_with_their_matmul_rate(model):
    rows = {r.chip: r for r in model.compare_chips()}
    # same FLOPs, same chip count: days are inversely proportional to achieved FLOP/s
    f2, _ = scale.achieved_flops_per_chip("trn2", "bf16")
    f3, _ = scale.achieved_flops_per_chip("trn3", "bf16")
    assert rows["trn2"].days / rows["trn3"].days == pytest.approx(f3 / f2)
    assert (
        rows["h100"].energy_mwh is not None and rows["trn2"].energy_mwh is None
    )  # no Trn2 power on record
    assert rows["trn1"].cost is not None
    # prices on record differ in kind (market estimates, on-demand list prices): each row says
    assert "market estimate" in rows["h100"].note and "on-demand" in rows["h200"].note
    assert rows["trn3"].note.startswith("no price on record")


@pytest.mark.parametrize(
    "bad",
    [
        {"model": "gpt9"},
        {"system": "trn9.mega"},
        {"dtype": "fp4"},
        {"dtype": "mxfp8"},  # Trainium2 has no MX path
        {"tp": 3},  # does not divide 16 chips
        {"global_batch": 0},
        {"tokens": -1.0},
        {"tokens": 1e300},  # 300-digit days and dollars are not an answer
        {"colour": "red"},
    ],
)
def test_bad_settings_raise_and_keep_the_last_plan(model, bad):
    before = model.result
    with pytest.raises(ValueError):
        model.set(**bad)
    assert model.result is before


def test_view_draws_memory_step_and_chips_and_explains_infeasible_plans():
    e = ScaleExplorer(
        model="llama3-8b", system="trn2.48xlarge", tp=4, pp=1, global_batch=64, seq_len=2048
    )
    gib = 2**30
    assert e.memory.data[0].y[0] == pytest.approx(e.model.result.memory.weights / gib)
    assert e.memory.data[4].y[0] == pytest.approx(catalog.chip("trn2").hbm_bytes * 0.95 / gib)
    assert "compute" in list(e.step.data[0].y)
    before = list(e.step.data[0].x)
    e.tp.value = 8
    assert list(e.step.data[0].x) != before
    e.dtype.value = "mxfp8"  # refused: no MX path on Trainium2
    assert "NeuronCore-v4" in e.message.value and e.dtype.value == "bf16"
    e.recompute.value = "none"
    e.tp.value = 1  # every chip holds all 16 bytes per parameter (ZeRO-1 shards only Adam)
    e.seq_len.value = 16384  # a valid question whose answer is "does not fit"
    assert "cannot run" in e.message.value and "GiB per chip" in e.message.value
    assert len(e.chips.data[0].x) == 0


def test_a_split_that_does_not_divide_the_system_names_splits_that_do():
    m = ScaleModel(model="llama3-8b", system="trn2.48xlarge", tp=4, pp=1, global_batch=512)
    with pytest.raises(ValueError) as err:
        m.set(system="trn3-ultraserver-gen2", tp=8, pp=4)  # 32 does not divide 144
    said = str(err.value)
    for pp in (2, 3, 6, 9, 18):  # 8 x pp divides 144 for exactly these
        assert 144 % (8 * pp) == 0 and f"{pp}" in said.split("with pp")[1]
    assert "best split" in said
    m.set(system="trn3-ultraserver-gen2", tp=8, pp=9)  # one the advice names: it plans
    assert m.result.parallel.pp == 9


def test_the_chip_table_says_when_plain_fp8_misses_a_chips_mx_rate():
    rows = {r.chip: r for r in ScaleModel(dtype="fp8").compare_chips()}
    trn3 = catalog.chip("trn3")
    ratio = trn3.peak_flops("mxfp8") / trn3.peak_flops("fp8")
    assert f"mxfp8 gets its {ratio:.2g}x" in rows["trn3"].note
    assert "mxfp8" not in rows["trn2"].note and "mxfp8" not in rows["b200"].note


def test_the_summary_says_small_budgets_in_units_that_read():
    m = ScaleModel(model="llama3-8b", system="trn2.48xlarge", tp=4, pp=1, global_batch=64)
    m.set(tokens=1e6)
    assert re.search(r"1M tokens take [\d.]+ s, about \$0\.\d\d", m.summary())
    m.set(tokens=15.6e12)
    assert "15.6T tokens take" in m.summary() and "days" in m.summary()


def test_typed_counts_out_of_range_are_refused_aloud_not_clamped():
    e = ScaleExplorer(model="llama3-8b", system="trn2.48xlarge", tp=4, pp=1, global_batch=64)
    e.global_batch.value = 0
    assert "global_batch = 0 is out of range" in e.message.value
    assert e.model.global_batch == 64 and e.global_batch.value == 64
    e.count.value = 10**7  # 160 million chips
    assert "up to 1,000,000 chips" in e.message.value and e.model.count == 1


def test_the_search_runs_on_a_worker_thread_and_can_be_cancelled():
    e = ScaleExplorer(
        model="llama3-8b", system="trn2.48xlarge", tp=4, pp=1, global_batch=64, seq_len=2048
    )
    before = e.model.result
    e.auto.value = True  # returns at once; the search runs on its own thread
    job = e.job
    assert job is not None and job.thread.name == "trnlab-search"
    assert job.wait(timeout=120)
    assert job.error is None and not job.cancelled
    best = scale.search("llama3-8b", "trn2.48xlarge", global_batch=64, seq_len=2048).best
    assert e.model.result.step_time == pytest.approx(best.step_time)
    assert e.progress.value == 1.0 and e.cancel.disabled
    assert e.model.result is not before


def test_a_cancelled_search_keeps_the_last_plan():
    m = ScaleModel(model="llama3-8b", system="trn2.48xlarge", tp=4, pp=1, global_batch=64,
                   seq_len=2048)  # fmt: skip
    before = m.result
    gate = threading.Event()
    job = m.set_async(on_progress=lambda share: gate.wait(), auto=True)  # held at its start
    job.cancel()
    gate.set()
    assert job.wait(timeout=120)
    assert job.cancelled and m.result is before and m.auto is False
