"""Response time of the MatmulStepper at its default sizes (issue 4 target: < 100 ms).

Figures, each the median (and worst) of ``repeats`` rounds, headless (no browser: the time
to re-run the model and update every FigureWidget, not the browser's drawing):

- ``control_change_ms``: a setting changes (the kernel variant, cycled through the
  progression; a tile size; M): re-record and re-schedule the matmul, redraw every chart;
- ``step_ms``: one press of the step button (cursor-dependent parts only);
- ``model_control_change_ms``: the model alone (``MatmulStepperModel.set``), for comparison;
- ``build_s``: constructing the dashboard once (FigureWidgets included).
"""

from __future__ import annotations

import statistics
import time


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def run(repeats: int = 5) -> dict:
    from trnlab import kernels
    from trnlab.widgets import MatmulStepper
    from trnlab.widgets.stepper_model import MatmulStepperModel

    kernels.matmul((256, 512), (512, 1024), variant="tiled", numerics=False)  # compile / load
    t0 = time.perf_counter()
    s = MatmulStepper()
    build = time.perf_counter() - t0

    changes, steps, model_changes = [], [], []
    variants = list(kernels.VARIANTS)
    for _ in range(repeats):
        for v in [*variants[1:], variants[0]]:
            changes.append(_timed(lambda v=v: setattr(s.variant, "value", v)))
        changes.append(_timed(lambda: setattr(s.tiles["tile_n"], "value", 256)))
        changes.append(_timed(lambda: setattr(s.tiles["tile_n"], "value", 512)))
        changes.append(_timed(lambda: setattr(s.sizes["m"], "value", 384)))
        changes.append(_timed(lambda: setattr(s.sizes["m"], "value", 256)))
        for _ in range(10):
            steps.append(_timed(s.buttons["step"].click))
        m = MatmulStepperModel()
        for v in [*variants[1:], variants[0]]:
            model_changes.append(_timed(lambda v=v, m=m: m.set(variant=v)))
        # the largest problem a learner can type: max_matmuls matmuls of the default tiles
        largest = _timed(lambda: s.set(m=4096, k=2048, n=2048))
        s.set(m=256, k=512, n=1024)
    assert not s.message.value, s.message.value

    return {
        "defaults": "trn1, A[256 x 512] @ B[512 x 1024] bf16, tiled, tiles 128 x 128 x 512",
        "build_s": round(build, 3),
        "control_change_ms": round(statistics.median(changes), 2),
        "control_change_worst_ms": round(max(changes), 2),
        "step_ms": round(statistics.median(steps), 2),
        "step_worst_ms": round(max(steps), 2),
        "model_control_change_ms": round(statistics.median(model_changes), 2),
        "largest_problem_ms": round(largest, 1),
        "targets": {"control_change_ms": "< 100", "largest_problem_ms": "< 1000"},
    }
