"""CollectiveExplorer's view without a browser: controls redraw the right panels; refusals
show a message and keep the drawn state; every control explains itself."""

from __future__ import annotations

import ipywidgets as W
import numpy as np
import pytest

from trnlab import catalog
from trnlab.widgets import CollectiveExplorer
from trnlab.widgets.collective_explorer import NAMES

MiB = 1 << 20


@pytest.fixture
def explorer():
    return CollectiveExplorer(system="trn2.48xlarge", op="all_reduce", algorithm="ring")


def _trace(fig, name):
    return next(t for t in fig.data if t.name and t.name.startswith(name))


def test_sweep_draws_every_fitting_algorithm_and_marks_the_chosen_one(explorer):
    sw = explorer.model.sweep()
    ring_time = explorer.sweep_fig.data[2 * NAMES.index("ring")]
    assert list(ring_time.y) == pytest.approx(list(sw.time["ring"]))
    assert ring_time.line.width == 4  # the chosen algorithm is drawn thick
    assert not explorer.sweep_fig.data[2 * NAMES.index("hierarchical")].visible  # needs EFA
    star = explorer.sweep_fig.data[-2]
    assert list(star.x) == [64 * MiB]
    assert star.y[0] == pytest.approx(explorer.model.result()[0].time)
    # The shaded latency-bound region ends where the bytes cost as much as the fixed part:
    # (T_op + 30 alpha) / (30 / (16 eff B)) with the calibrated fixed cost and efficiency.
    fig = catalog.table("collectives")
    op, eff = fig["op_overhead"].value, fig["neuronlink_efficiency"].value
    shade = explorer.sweep_fig.layout.shapes[0]
    assert shade.x1 == pytest.approx((op + 30 * 1.5e-6) * 16 * eff * 128e9 / 30, rel=1e-3)
    assert "bandwidth-bound" in explorer.summary.value


def test_link_colours_follow_the_simulated_load(explorer):
    d = explorer.model.drawing()
    hover = explorer.fabric_fig.data[1 + 5]
    assert list(hover.marker.color) == pytest.approx(list(d.load))
    # The ring's 16 links are busy (a high bin), the other 16 idle (the grey trace).
    idle_lines = sum(v is None for v in explorer.fabric_fig.data[0].x)
    assert idle_lines == 16
    busy_lines = sum(sum(v is None for v in t.x) for t in explorer.fabric_fig.data[1:6])
    assert busy_lines == 16
    assert len(explorer.fabric_fig.data[-2].x) == 16  # chips


def test_system_change_redraws_and_updates_the_algorithm_options(explorer):
    before = list(explorer.sweep_fig.data[0].y)
    explorer.system.value = "trn3-ultraserver-gen1"
    assert explorer.message.value == ""
    assert list(explorer.sweep_fig.data[0].y) != before
    assert "torus" not in explorer.algorithm.options
    assert len(explorer.fabric_fig.data[-1].x) == 16 + 1  # 16 sled switches + the NeuronSwitch
    assert "trn3-ultraserver-gen1" in explorer.summary.value
    explorer.algorithm.value = "direct"
    assert explorer.model.algorithm == "direct"
    explorer.parts.value = 4  # 256 chips over EFA
    assert "over EFA" in explorer.summary.value


def test_a_refused_change_shows_a_message_and_keeps_the_drawn_state(explorer, monkeypatch):
    before = list(explorer.sweep_fig.data[0].y)

    def refuse(**_):
        raise ValueError("not on this fabric")

    monkeypatch.setattr(explorer.model, "set", refuse)
    explorer.op.value = "broadcast"
    assert "not on this fabric" in explorer.message.value
    assert explorer.op.value == "all_reduce", "the control returns to what is drawn"
    assert list(explorer.sweep_fig.data[0].y) == before


def test_code_level_set_validates(explorer):
    with pytest.raises(ValueError, match="cannot run all_reduce"):
        explorer.set(algorithm="hierarchical")
    assert explorer.model.algorithm == "ring"
    explorer.set(system="trn2-ultraserver", algorithm="torus")
    assert explorer.algorithm.value == "torus"


def test_step_redraws_only_the_ring_animation(explorer, monkeypatch):
    z0 = np.array(explorer.anim_fig.data[3].z)
    assert (z0 == 1).all()  # before the first step each chip holds only its own data

    def no_sweep():
        raise AssertionError("a step change must not recompute or redraw the sweep")

    monkeypatch.setattr(explorer.model, "sweep", no_sweep)
    monkeypatch.setattr(explorer.model, "drawing", no_sweep)
    explorer.step.value = 3  # end of reduce-scatter on 4 chips: one complete chunk per chip
    z = np.array(explorer.anim_fig.data[3].z)
    assert (z == 4).sum(axis=1).tolist() == [1, 1, 1, 1]
    assert list(explorer.anim_fig.data[1].text) == ["c2", "c3", "c0", "c1"]
    assert "Step 3 of 6 (reduce-scatter)" in explorer.anim_summary.value


def test_more_ring_chips_extend_the_step_slider_and_play(explorer):
    explorer.ring_chips.value = 8
    assert explorer.step.max == explorer.play.max == 14
    explorer.step.value = 14
    assert (np.array(explorer.anim_fig.data[3].z) == 8).all()
    explorer.ring_chips.value = 2
    assert explorer.step.value == 2 and explorer.step.max == 2


def test_all_to_all_panel_compares_the_torus_with_the_switch(explorer):
    a2a = explorer.a2a_fig.data
    trn2, gen1 = a2a[0], a2a[1]
    assert (np.array(trn2.y) > 10 * np.array(gen1.y))[-20:].all()
    explorer.size.value = 1 << 30
    assert list(a2a[-1].x) == [1 << 30] * 3
    assert "1 GiB per chip" in explorer.a2a_summary.value


def test_every_control_has_a_description_and_a_tooltip(explorer):
    controls = [v for v in vars(explorer).values() if isinstance(v, W.ValueWidget)]
    assert len(controls) >= 8
    for c in controls:
        if isinstance(c, W.HTML):
            continue
        assert c.description and c.tooltip, c


def test_algorithm_tooltip_says_auto_is_the_runtimes_choice_not_the_fastest(explorer):
    tip = explorer.algorithm.tooltip
    assert "fastest closed form" not in tip
    assert "Neuron runtime" in tip and "1 MB" in tip and "56 MB" in tip


def test_under_auto_the_shading_follows_the_algorithm_auto_runs(explorer):
    # On the Trn3 Gen2 UltraServer auto runs a ring at 64 MiB: 286 steps of 2 us plus the
    # fixed cost is the latency line, not the mesh's ~10 us at 1 byte.
    op = catalog.table("collectives")["op_overhead"].value
    explorer.set(system="trn3-ultraserver-gen2", algorithm="auto")
    lat = _trace(explorer.sweep_fig, "latency term")
    assert lat.y[0] == pytest.approx(op + 286 * 2e-6, rel=1e-3)
    assert "ring" in lat.name
    assert "auto's pick at 64 MiB" in explorer.sweep_fig.layout.title.text
    assert "64 MiB is latency-bound" in explorer.summary.value


def test_copies_are_offered_only_for_systems_with_efa(explorer):
    explorer.parts.value = 4
    assert explorer.model.parts == 4
    explorer.system.value = "inf2.48xlarge"  # no EFA bandwidth in the catalogue
    assert explorer.message.value == ""
    assert explorer.model.parts == 1 and explorer.parts.value == 1
    assert [v for _, v in explorer.parts.options] == [1] and explorer.parts.disabled
    assert "copies went back to 1" in explorer.summary.value
    with pytest.raises(ValueError, match="EFA"):
        explorer.set(parts=2)
    assert explorer.model.parts == 1
    explorer.system.value = "gb200-nvl72"
    assert [v for _, v in explorer.parts.options] == [1]
    explorer.system.value = "trn2-ultraserver"
    assert [v for _, v in explorer.parts.options] == [1, 2, 4] and not explorer.parts.disabled
    explorer.parts.value = 2
    assert explorer.message.value == "" and "over EFA" in explorer.summary.value


def test_small_bus_bandwidths_show_their_digits_and_systems_their_names(explorer):
    explorer.size.value = 1024
    star = explorer.sweep_fig.data[-1]
    assert "MB/s" in star.hovertext[0] and "0.0 GB/s" not in explorer.summary.value
    ring_bw = explorer.sweep_fig.data[2 * NAMES.index("ring") + 1]
    assert "MB/s" in ring_bw.hovertext[0]
    labels = dict(explorer.system.options)
    assert labels["Trn2 UltraServer, 64 chips"] == "trn2-ultraserver"
    assert explorer.system.label == "trn2.48xlarge, 16 chips"
