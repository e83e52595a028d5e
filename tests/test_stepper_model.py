"""The stepper's model without a browser: cursor, counters, memory maps, HBM pictures, settings."""

from __future__ import annotations

import numpy as np
import pytest

from trnlab import core, kernels
from trnlab.core import _program as P
from trnlab.widgets.stepper_model import MatmulStepperModel, RunCursor


@pytest.fixture
def model():
    return MatmulStepperModel()  # tiled, 256 x 512 x 1024 bf16 on trn1


def test_defaults_step_a_tiled_matmul_with_the_expected_program(model):
    # tiled: per matmul two loads; (256/128) x (1024/512) x (512/128) = 16 matmuls, and one
    # PSUM evacuation + one store per output tile (4)
    counts = model.run.program.counts()
    assert counts == {"dma_load": 32, "matmul": 16, "copy": 4, "dma_store": 4}
    assert model.cursor.n_steps == 56 and model.position == 0
    assert model.cursor.time == 0.0


def test_stepping_moves_in_time_order_and_stops_at_the_ends(model):
    c = model.cursor
    times = []
    for _ in range(c.n_steps + 3):
        times.append(c.time)
        model.step()
    assert c.at_end and c.position == c.n_steps and c.current is None
    assert times == sorted(times) and times[-1] == pytest.approx(model.run.latency)
    model.back(1000)
    assert c.position == 0
    model.last().back()
    assert c.position == c.n_steps - 1
    for i in (0, 7, 55):
        c.jump(i)
        assert c.current == i and c.time == model.run.start[i]
    c.first().next_op("matmul")
    assert model.run.program.table["op"][c.current] == 2  # matmul
    assert c.current in c.in_flight()
    with pytest.raises(ValueError, match="outside the run"):
        c.set(position=57)
    with pytest.raises(ValueError, match="unknown operation"):
        c.next_op("fma")


def test_time_moves_the_cursor_to_the_last_started_instruction(model):
    r, c = model.run, model.cursor
    t = r.latency / 2
    c.set(time=t)
    assert c.time <= t
    later = r.start[c.order[c.position + 1]]
    assert later > t or later == c.time
    c.set(time=r.latency * 2)
    assert c.at_end


def test_counters_run_from_zero_to_the_run_totals(model):
    c = model.cursor
    first = c.counters()
    assert first["flops"] == 0 and first["hbm_bytes"] == 0 and first["instructions_done"] == 0
    flops = []
    while not c.at_end:
        flops.append(c.counters()["flops"])
        c.step()
    end = c.counters()
    assert flops == sorted(flops)
    assert end["flops"] == model.run.flops == 2 * 256 * 512 * 1024
    assert end["hbm_bytes"] == model.run.hbm_bytes
    assert end["utilisation"] == pytest.approx(model.run.utilisation)
    assert "of 56 instructions done" in c.summary()


def test_hbm_pictures_show_reuse_per_variant(model):
    model.last()
    pics = model.matrices()
    assert pics["A"].shape == (256, 512) and pics["B"].shape == (512, 1024)
    # tiled re-loads each A tile once per N tile (1024/512) and each B tile once per M tile
    assert (pics["A"].counts == 2).all() and (pics["B"].counts == 2).all()
    assert (pics["C"].counts == 1).all() and pics["C"].kind == "stores"
    model.set(variant="hoisted")
    model.last()
    pics = model.matrices()
    assert (pics["A"].counts == 1).all(), "hoisted loads A's strip once per M tile"
    assert (pics["B"].counts == 2).all()
    model.set(variant="blocked_mn")
    model.last()
    pics = model.matrices()
    assert (pics["A"].counts == 1).all() and (pics["B"].counts == 1).all()


def test_in_flight_tiles_are_traced_to_hbm(model):
    c = model.cursor
    c.first().next_op("matmul").next_op("matmul")  # second matmul: k tile 1 of (m 0, n 0)
    pics = model.matrices()
    # A[0:128, 128:256] (rows m, columns k) times B[128:256, 0:512] into C[0:128, 0:512]
    assert (0, 128, 128, 256) in pics["A"].working
    assert (128, 256, 0, 512) in pics["B"].working
    assert pics["C"].working == ((0, 128, 0, 512),)
    # a DMA in flight shows as moving, not working
    c.first()
    first = model.matrices()["A"]
    assert first.moving == ((0, 128, 0, 128),) and first.working == ()


def test_blocked_mnk_traces_partial_sums_through_sbuf_accumulators_to_c():
    m = MatmulStepperModel(m=256, k=512, n=1024, variant="blocked_mnk")
    c = m.cursor
    c.first().next_op("matmul")
    pic = m.matrices()["C"]
    assert len(pic.working) == 1
    r0, r1, c0, c1 = pic.working[0]
    assert 0 <= r0 < r1 <= 256 and 0 <= c0 < c1 <= 1024 and (r1 - r0, c1 - c0) == (128, 512)


def test_memory_maps_agree_with_the_runs_occupancy(model):
    r, c = model.run, model.cursor
    times, used = r.occupancy("sbuf")
    checked = 0
    for p in range(0, c.n_steps, 3):
        c.set(position=p)
        boxes = c.tiles("sbuf")
        live = sum(b.size for b in boxes if b.live)
        k = max(0, int(np.searchsorted(times, c.time, side="right")) - 1)
        assert live == used[k], (p, [b for b in boxes if b.live])
        checked += 1
    assert checked > 10
    c.first().next_op("matmul")
    psum = c.tiles("psum")
    # the compiler's two rotating buffers of each tile: the matmul accumulates into the first
    assert [(b.operand, b.start, b.size, b.active) for b in psum] == [
        ("partial sums", 0, 1, True),
        ("partial sums", 1, 1, False),
    ]
    ops = {b.name: b.operand for b in c.tiles("sbuf")}
    # the tiles are named after the NKI kernel's variables (trnlab.kernels.nki_matmul_tiled)
    names = {"lhsT_tile": "a_t", "rhs_tile": "b", "res_sb": "c"}
    assert ops == {f"{t}[{i}]": op for t, op in names.items() for i in (0, 1)}
    assert c.operands()[:3] == ["a_t", "b", "c"]


def test_bad_settings_are_refused_and_the_state_kept(model):
    before = (dict(model.settings), model.run, model.revision)
    with pytest.raises(ValueError, match="no mxfp4 path"):
        model.set(dtype="mxfp4")  # Trainium's Tensor Engine has no MX formats
    with pytest.raises(ValueError, match="512"):
        model.set(tile_n=1024)  # one PSUM bank holds 512 fp32 per partition
    with pytest.raises(ValueError, match="has 128"):
        model.set(tile_k=256)
    with pytest.raises(ValueError, match="uses 128 x 128 x 512"):
        model.set(variant="pipelined", tile_m=64)
    with pytest.raises(ValueError, match="steps at most"):
        model.set(m=65536, n=65536)
    with pytest.raises(ValueError, match="no setting"):
        model.set(size=3)
    with pytest.raises(ValueError, match="outside the run"):
        model.set(variant="hoisted", position=10_000)
    assert (dict(model.settings), model.run, model.revision) == before
    model.set(chip="trn3", dtype="mxfp4")
    assert model.run.params.chip == "trn3" and model.revision == before[2] + 1


def test_a_new_run_keeps_the_cursor_at_the_same_fraction(model):
    model.set(position=28)  # half of 56
    model.set(variant="blocked_mn")
    assert model.position == round(0.5 * model.cursor.n_steps)
    model.set(variant="tiled", position=3)
    assert model.position == 3 and model.settings["variant"] == "tiled"


def test_tile_sizes_change_the_program(model):
    small = MatmulStepperModel(tile_k=64, tile_m=64, tile_n=256)
    assert small.run.program.counts()["matmul"] == 8 * 4 * 4
    assert small.run.latency > model.run.latency


def test_gantt_merges_long_runs_and_keeps_every_instruction():
    run = kernels.matmul((1024, 1024), (1024, 2048), variant="tiled", numerics=False)
    cur = RunCursor(run)
    full = cur.gantt()
    assert len(full["start"]) == len(run.program)
    merged = cur.gantt(max_bars=200)
    assert len(merged["start"]) < len(run.program)
    assert merged["count"].sum() == len(run.program)
    for e in np.unique(run.program.table["engine"]):
        sel = merged["engine"] == e
        assert merged["count"][sel].sum() == (run.program.table["engine"] == e).sum()
        assert merged["start"][sel].min() == run.start[run.program.table["engine"] == e].min()
        assert merged["end"][sel].max() == run.end[run.program.table["engine"] == e].max()


def test_gpsimd_descriptor_work_of_software_dge_transfers_has_its_bars():
    """Trn2 loads get software-DGE descriptors: GpSimd writes them before each transfer, and
    the timeline shows that work (what Run.busy counts) on the GpSimd row."""
    run = kernels.matmul((512, 512), (512, 1024), variant="tiled", chip="trn2", numerics=False)
    cur = RunCursor(run)
    t = run.program.table
    sw = np.flatnonzero((t["engine"] >= P.FIRST_DMA) & ((t["flags"] & P.FLAG_DGE_SW) != 0))
    assert len(sw) > 0
    d = cur.descriptor_bars()
    assert sorted(d["index"]) == sorted(sw)
    assert (d["engine"] == P.GPSIMD).all()
    length = float(run.params.swdge_gpsimd_time)
    np.testing.assert_allclose(d["end"] - d["start"], length)
    np.testing.assert_array_equal(d["start"], run.start[d["index"]])
    o = np.argsort(d["start"])  # GpSimd writes one transfer's descriptors at a time
    assert (d["start"][o][1:] >= d["end"][o][:-1] - 1e-15).all()
    gps = t["engine"] == P.GPSIMD
    own = float((run.issue_end[gps] - run.start[gps]).sum())
    assert run.busy["GpSimd"] * run.latency == pytest.approx(own + len(sw) * length)
    assert (P.GPSIMD, "GpSimd") in cur.engines()
    merged = cur.descriptor_bars(max_bars=5)
    assert len(merged["start"]) < len(sw) and merged["count"].sum() == len(sw)
    trn1 = RunCursor(kernels.matmul((512, 512), (512, 1024), variant="tiled", chip="trn1",
                                    numerics=False))  # fmt: skip
    assert len(trn1.descriptor_bars()["start"]) == 0  # static descriptors on Trn1
    assert P.GPSIMD not in dict(trn1.engines())


def test_trajectory_ends_at_the_runs_roofline_point(model):
    tr = model.cursor.trajectory()
    roof = model.run.roofline()
    assert tr["intensity"][-1] == pytest.approx(roof["intensity"])
    assert tr["achieved_flops"][-1] == pytest.approx(roof["achieved_flops"])
    assert (tr["achieved_flops"] <= roof["peak_flops"] * (1 + 1e-9)).all()


def test_cursor_works_on_any_kernel():
    def scale(ctx, x, y):
        t = ctx.sbuf(x.shape, "bf16", "x tile")
        o = ctx.sbuf(x.shape, "bf16", "scratch")
        ctx.load(t, x)
        ctx.activation(o, t, "relu", scale=2.0)
        ctx.store(y, o)

    r = core.run(scale, x=core.hbm(np.ones((128, 256))), y=core.hbm((128, 256)))
    c = RunCursor(r)
    c.jump(1)  # the activation: traced back to x, forward to y
    assert c.hbm("x").working == ((0, 128, 0, 256),)
    assert c.hbm("y").working == ((0, 128, 0, 256),)
    assert {b.name: b.operand for b in c.tiles("sbuf")} == {"x tile": "x", "scratch": "y"}
    with pytest.raises(ValueError, match="no HBM tensor"):
        c.hbm("z")
