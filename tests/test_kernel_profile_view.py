"""KernelProfile without a browser: the timeline, memories and counters of any kernel run."""

from __future__ import annotations

import numpy as np
import pytest

from trnlab import core, kernels
from trnlab.widgets import KernelProfile
from trnlab.widgets.stepper_charts import OP_GROUPS


def _kernel(ctx, x, y):
    t = ctx.sbuf(x.shape, "bf16", "x tile")
    o = ctx.sbuf(x.shape, "bf16", "y tile")
    ctx.load(t, x)
    ctx.activation(o, t, "gelu")
    ctx.tensor_scalar(o, o, "multiply", 2.0)
    ctx.store(y, o)


@pytest.fixture(scope="module")
def run():
    return core.run(_kernel, x=core.hbm(np.ones((128, 1024))), y=core.hbm((128, 1024)))


def test_profile_of_a_learners_kernel_shows_every_instruction(run):
    p = KernelProfile(run)
    drawn = {
        label: len(t.x if t.x is not None else ())
        for (label, *_), t in zip(OP_GROUPS, p.gantt.fig.data, strict=False)
    }
    assert drawn["DMA load"] == 1 and drawn["activation"] == 1 and drawn["vector op"] == 1
    assert drawn["DMA store"] == 1 and drawn["matmul / transpose"] == 0
    assert not p.gantt.fig.data[2].visible, "no matmul bars"
    assert p.model.at_end, "starts at the end: the counters are the run's totals"
    assert "4 of 4 instructions done" in p.counters.value
    assert "Scalar" in p.summary.value and run.params.name in p.summary.value


def test_stepping_a_profile(run):
    p = KernelProfile(run, position=0)
    assert p.position.value == 0
    p.buttons["step"].click()
    assert p.model.current == 1 and "activation" in p.step_text.value
    boxes = {t.name: list(t.marker.line.width) for t in p.memory.fig.data if t.visible}
    assert boxes["x"] == [3], "the activation in flight reads the x tile"
    p.position.value = 3
    assert p.model.position == 3 and "dma_store" in p.step_text.value
    p.position.max = 99
    p.position.value = 99  # beyond the run: refused, shown, and the slider put back
    assert "outside the run" in p.message.value and p.position.value == 3


def test_profile_of_a_reference_kernel_has_a_roofline(run):
    r = kernels.matmul((512, 512), (512, 512), variant="pipelined", numerics=False)
    p = KernelProfile(r)
    run_pt = p.roofline.fig.data[2]
    assert run_pt.x[0] == pytest.approx(r.arithmetic_intensity)
    assert run_pt.y[0] == pytest.approx(r.achieved_flops)
    with pytest.raises(TypeError, match=r"core\.Run"):
        KernelProfile(r.program)


def test_a_selective_scan_run_draws_its_scan_instructions():
    """Every instruction the model records has a bar colour (a scan once had none and the
    timeline raised KeyError)."""
    from trnlab.core import _program as P

    shapes = dict(delta=(128, 64), u=(128, 64), a=(128, 2), b=(2, 64), c=(2, 64))
    run = kernels.selective_scan(**shapes, version="v2", chip="trn1", numerics=False)
    p = KernelProfile(run)
    scans = int((run.program.table["op"] == P.TENSOR_SCAN).sum())
    bars = sum(len(t.x) for t in p.gantt.fig.data if t.name == "vector op" and t.x is not None)
    assert scans == 2 and bars >= scans


def test_every_operation_has_a_timeline_group():
    grouped = [op for _, ops, _, _ in OP_GROUPS for op in ops]
    assert sorted(grouped) == list(range(len(core.OPS))), "an op with no bar would not draw"


def test_profile_and_cursor_of_a_kernel_with_dma_copies():
    """SBUF-to-SBUF and HBM-to-HBM copies draw, count the run's HBM bytes and mark what
    they write."""

    def k(ctx, x, y, z):
        a, b = ctx.sbuf((8, 16), "fp32"), ctx.sbuf((8, 16), "fp32")
        ctx.load(a, x)
        ctx.dma_sbuf(b, a)
        ctx.store(y, b)
        ctx.dma_hbm(z, y)

    r = core.run(k, x=core.hbm(np.ones((8, 16))), y=core.hbm((8, 16)), z=core.hbm((8, 16)))
    p = KernelProfile(r)
    drawn = {
        label: len(t.x if t.x is not None else ())
        for (label, *_), t in zip(OP_GROUPS, p.gantt.fig.data, strict=False)
    }
    assert drawn["DMA copy (SBUF to SBUF, HBM to HBM)"] == 2
    m = p.model
    assert f"{r.hbm_bytes:,.0f}" in f"{m.counters()['hbm_bytes']:,.0f}"
    assert m.hbm("z").kind == "stores" and m.hbm("z").counts.max() == 1
    assert m.hbm("y").counts.max() == 2  # stored once, then read by the copy
    copy = int(np.flatnonzero(r.program.table["op"] == core.OPS.index("dma_hbm"))[0])
    assert {h for h, *_ in m.hbm_regions(copy)} == {1, 2}  # y (source) and z
    sbuf = int(np.flatnonzero(r.program.table["op"] == core.OPS.index("dma_sbuf"))[0])
    assert {h for h, *_ in m.hbm_regions(sbuf)} == {0, 1}  # traced back to x, on to y
