"""Dashboards refuse bad settings with a message, all or nothing, and never break on one of
their own options (issue 15, item 4): each test failed before its fix."""

from __future__ import annotations

import numpy as np
import pytest

from trnlab import core
from trnlab.widgets import (
    ChipComparison,
    FormatComparison,
    FormatExplorer,
    SettingError,
)
from trnlab.widgets.stepper_model import MatmulStepperModel, RunCursor


def _snapshot(model) -> dict:
    return {k: v for k, v in vars(model).items() if not k.startswith("_")}


def test_format_explorer_draws_every_format_it_offers_and_recovers():
    view = FormatExplorer(size=64, formats=("bf16",))
    assert "int8_mx" not in view.formats.options  # an element type, not a format of its own
    view.formats.value = ("fp32",)  # used to raise in the callback and leave the view broken
    assert view.message.value == ""
    assert "fp32" in view.summary_text()
    assert len(view.model.grid("fp32")) > 10  # a tick per power of two
    view.formats.value = ("bf16", "mxfp4")
    assert view.message.value == "" and view.model.formats == ("bf16", "mxfp4")


@pytest.mark.parametrize(
    "changes, match",
    [
        (dict(formats=("int8_mx",)), "mxint8"),
        (dict(formats="bf16"), "list"),
        (dict(formats=None), "list"),
        (dict(formats=("bf16", "BF16")), "twice"),
        (dict(sparse="yes"), "sparse"),
        (dict(seed=1.5), "seed"),
        (dict(seed="abc"), "seed"),
        (dict(block_size=32.0), "block size"),
        (dict(chip="trn4"), "announced"),
        (dict(distribution="gausian"), "Did you mean 'gaussian'"),
    ],
)
def test_format_comparison_refuses_and_keeps_its_state(changes, match):
    m = FormatComparison(size=64)
    before = _snapshot(m)
    with pytest.raises(SettingError, match=match):
        m.set(**{"formats": ("fp8_e5m2",), "rounding": "stochastic", **changes})  # good too
    assert _snapshot(m) == before


def test_format_comparison_names_are_case_insensitive_and_canonical():
    m = FormatComparison(formats=("BF16", " MXFP4 "), chip="TRN2", rounding="Nearest", size=64)
    assert m.formats == ("bf16", "mxfp4") and m.chip == "trn2" and m.rounding == "nearest"
    assert [r.fmt for r in m.rows()] == ["bf16", "mxfp4"]


def test_chip_comparison_checks_items_and_metrics():
    m = ChipComparison(items=("TRN2", "Trainium3"))
    assert m.items == ("trn2", "trn3")
    before = _snapshot(m)
    for bad in ("trn2", 5, ("trn2", "trn2"), ("trn2", "nope")):
        with pytest.raises(SettingError):
            m.set(items=bad, chart="scatter")
        assert _snapshot(m) == before
    with pytest.raises(SettingError, match="metric"):
        m.rows("nope")  # used to be a raw KeyError
    with pytest.raises(SettingError, match="level"):
        m.options("chips!")


def test_stepper_model_checks_and_keeps_its_state():
    m = MatmulStepperModel(m=256, k=256, n=512, chip="Trainium2", variant="TILED")
    assert m.chip == "trn2" and m.variant == "tiled"
    before = (dict(m.settings), m.cursor, m.position, m.revision)
    for changes in (dict(m=0), dict(tile_k=0), dict(dtype="mxfp9"), dict(m=512, n=1.5)):
        with pytest.raises(SettingError):
            m.set(**changes)
        assert (dict(m.settings), m.cursor, m.position, m.revision) == before
    with pytest.raises(SettingError, match="max_matmuls"):
        MatmulStepperModel(max_matmuls=0)


def test_run_cursor_checks_its_queries():
    def k(ctx, x, y):
        t = ctx.sbuf((4, 8), "bf16")
        ctx.load(t, x)
        ctx.store(y, t)

    run = core.run(k, x=core.hbm(np.ones((4, 8), np.float32)), y=core.hbm((4, 8)))
    c = RunCursor(run)
    with pytest.raises(SettingError, match="time"):
        c.set(time="abc")  # used to be a raw ValueError from float()
    with pytest.raises(SettingError, match="cells"):
        c.hbm("x", cells=0)  # used to divide by zero
    with pytest.raises(SettingError, match="max_bars"):
        c.gantt(0)
    with pytest.raises(SettingError, match="steps"):
        c.step("1")
    with pytest.raises(SettingError, match="instruction"):
        c.jump(1.5)
    with pytest.raises(TypeError, match="Run"):
        RunCursor(None)
    assert c.next_op("DMA_Store").describe().startswith("Step 2")


def test_scale_and_collective_models_check_and_keep_their_state():
    from trnlab.widgets import CollectiveModel, ScaleModel

    m = ScaleModel(model="LLAMA3-8B", system="Trn2.48xlarge", tp=8, pp=1, global_batch=256)
    assert m.model == "llama3-8b" and m.system == "trn2.48xlarge"
    before = (dict(m._state), m._result)
    for changes in (
        dict(tokens=float("nan")),  # used to pass (nan <= 0 is False)
        dict(tokens="1T"),  # used to be a raw TypeError
        dict(auto="yes"),
        dict(zero=4),
        dict(count=10**9),
        dict(dtype="fp88"),
    ):
        with pytest.raises(SettingError):
            m.set(**changes)
        assert (dict(m._state), m._result) == before

    c = CollectiveModel()
    before = _snapshot(c)
    for changes in (
        dict(parts=True),  # True == 1 used to pass
        dict(nbytes=float(2**20)),
        dict(step=1.5),  # int(1.5) used to truncate it
        dict(algorithm="rign"),
        dict(system="trn2.48xlargee"),
    ):
        with pytest.raises(SettingError):
            c.set(**changes)
        assert _snapshot(c) == before
    c.set(system="TRN2-ULTRASERVER", algorithm="AUTO", ring_chips=8, step=14)
    c.set(ring_chips=2)  # the step no longer exists: it goes back, and the note says so
    assert c.step == 2 and "went back" in c.note
