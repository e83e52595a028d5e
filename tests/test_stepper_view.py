"""MatmulStepper's view without a browser: controls and step buttons redraw every chart."""

from __future__ import annotations

import numpy as np
import pytest

from trnlab.widgets import MatmulStepper
from trnlab.widgets.stepper_charts import OP_GROUPS


@pytest.fixture(scope="module")
def stepper():
    return MatmulStepper()  # tiled, 256 x 512 x 1024 bf16 on trn1


@pytest.fixture(autouse=True)
def _reset(stepper):
    stepper.set(variant="tiled", chip="trn1", dtype="bf16", m=256, k=512, n=1024, position=0)
    stepper.set(tile_k=128, tile_m=128, tile_n=512)
    stepper.message.value = ""


def _bars(stepper):
    return {
        label: len(trace.x if trace.x is not None else ())
        for (label, *_), trace in zip(OP_GROUPS, stepper.gantt.fig.data, strict=False)
    }


def test_the_timeline_has_a_bar_per_instruction_on_its_engine(stepper):
    bars = _bars(stepper)
    assert bars["DMA load"] == 32 and bars["matmul / transpose"] == 16 and bars["DMA store"] == 4
    assert sum(bars.values()) == stepper.model.cursor.n_steps
    matmuls = stepper.gantt.fig.data[2]
    assert set(matmuls.y) == {"Tensor"}
    r = stepper.model.run
    mm = np.flatnonzero(r.program.table["op"] == 2)
    np.testing.assert_allclose(sorted(matmuls.base), sorted(r.start[mm] * 1e6))
    assert "matmul on Tensor" in matmuls.hovertext[0]


def test_step_buttons_move_the_cursor_and_every_view_follows(stepper):
    stepper.buttons["next_matmul"].click()
    stepper.buttons["next_matmul"].click()
    m = stepper.model
    assert m.run.program.table["op"][m.cursor.current] == 2
    assert stepper.position.value == m.position
    line = stepper.gantt.fig.layout.shapes[0]
    assert line.x0 == pytest.approx(m.cursor.time * 1e6)
    flight = stepper.gantt.fig.data[len(OP_GROUPS)]
    assert len(flight.x) == len(m.cursor.in_flight())
    assert "matmul on Tensor" in stepper.step_text.value
    # A [m, k]: the engine in flight multiplies rows 0:128, columns 128:256 of A
    working_a = stepper.hbm.fig.data[3 + 1]  # heatmaps, then (moving, working) per matrix
    assert list(working_a.x[:5]) == [128, 256, 256, 128, 128]
    assert list(working_a.y[:5]) == [0, 0, 128, 128, 0]
    stepper.buttons["back"].click()
    assert stepper.model.position == m.position and stepper.position.value == m.position
    stepper.buttons["last"].click()
    assert stepper.model.cursor.at_end
    assert "End of the run" in stepper.step_text.value
    heat_a = stepper.hbm.fig.data[0]
    assert np.asarray(heat_a.z).min() == 2, "tiled loads every A tile twice (N / 512)"
    assert "56 of 56 instructions done" in stepper.counters.value
    stepper.buttons["first"].click()
    assert stepper.model.position == 0


def test_the_slider_and_play_move_the_model(stepper):
    stepper.position.value = 20
    assert stepper.model.position == 20
    stepper.play.value = 30  # linked to the slider
    assert stepper.model.position == 30 and stepper.position.value == 30
    times = stepper.model.cursor.counters()["time_s"]
    assert f"{times * 1e6:,.3f}" in stepper.counters.value


def test_memory_map_shows_the_live_tiles_by_operand(stepper):
    stepper.buttons["next_matmul"].click()
    names = [t.name for t in stepper.memory.fig.data[:3]]
    assert names == ["a_t", "b", "c"]
    a_bar, b_bar = stepper.memory.fig.data[0], stepper.memory.fig.data[1]
    # a bf16 [128 x 128] tile takes 256 B = 0.25 KiB of each partition, B's [128 x 512] 1 KiB;
    # each has the compiler's two rotating buffers: the matmul reads one, the next load fills
    # the other (both in use, drawn with the thick outline)
    assert list(a_bar.width) == [0.25, 0.25] and list(b_bar.width) == [1.0, 1.0]
    assert list(a_bar.marker.line.width) == [3, 3], "read by the matmul / written by a load"
    psum = stepper.memory.fig.data[-1]
    assert list(psum.x) == [0.5, 1.5] and list(psum.width) == [1, 1]


def test_a_control_change_reruns_and_redraws(stepper):
    before = stepper.summary.value
    stepper.variant.value = "blocked_mn"
    assert stepper.model.variant == "blocked_mn" and stepper.summary.value != before
    assert sum(_bars(stepper).values()) == stepper.model.cursor.n_steps
    assert stepper.position.max == stepper.model.cursor.n_steps
    stepper.variant.value = "pipelined"
    assert all(w.disabled for w in stepper.tiles.values())
    stepper.variant.value = "tiled"
    assert not any(w.disabled for w in stepper.tiles.values())
    stepper.sizes["m"].value = 512
    assert stepper.model.m == 512 and "A[512 x 512]" in stepper.summary.value


def test_a_refused_change_shows_why_and_keeps_the_view(stepper):
    bars = _bars(stepper)
    stepper.dtype.value = "mxfp4"  # no MX path on Trainium's Tensor Engine
    assert "no mxfp4 path" in stepper.message.value
    assert stepper.dtype.value == "bf16", "the control returns to what is drawn"
    assert _bars(stepper) == bars
    stepper.tiles["tile_n"].value = 1024  # a PSUM bank holds 512 fp32 per partition
    assert "512" in stepper.message.value and stepper.tiles["tile_n"].value == 512
    stepper.tiles["tile_n"].value = 256
    assert stepper.message.value == "" and _bars(stepper)["matmul / transpose"] == 32


def test_switching_to_a_fixed_tile_variant_takes_its_tiles_instead_of_refusing(stepper):
    stepper.variant.value = "tiled"
    stepper.tiles["tile_k"].value = 64
    assert stepper.model.tile_k == 64
    stepper.variant.value = "blocked_mnk"  # built from 128 x 128 x 512 tiles
    assert stepper.model.variant == "blocked_mnk" and stepper.message.value == ""
    assert [w.value for w in stepper.tiles.values()] == [128, 128, 512]
    assert all(w.disabled for w in stepper.tiles.values())


@pytest.mark.parametrize("typed", [0, -5, 100_000])
def test_a_typed_size_out_of_range_is_refused_aloud_not_clamped(stepper, typed):
    # A bounded box would turn 0 into 1 or 100,000 into 65,536 without a word.
    m = stepper.model.m
    stepper.sizes["m"].value = typed
    assert f"M = {typed:,} is out of range" in stepper.message.value
    assert stepper.model.m == m and stepper.sizes["m"].value == m


def test_every_control_has_a_description_and_tooltip(stepper):
    controls = [
        stepper.chip,
        stepper.variant,
        stepper.dtype,
        *stepper.sizes.values(),
        *stepper.tiles.values(),
        stepper.position,
        stepper.play,
        *stepper.buttons.values(),
    ]
    for c in controls:
        assert c.description and (c.tooltip or getattr(c, "tooltips", None)), c
