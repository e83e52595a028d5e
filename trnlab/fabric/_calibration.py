"""Fit the physical figures of the collective model on Neuron's published nccom-test runs.

- ``op_overhead``, the fixed cost per collective operation of the current runtime: the mean,
  over the small-message points marked ``"fixed cost"`` (at most 64 KiB, where bytes cost
  almost nothing) of the runs of SDK 2.24 and 2.28, of the measured time less the model's
  step costs; ``op_overhead_2023`` the same over the SDK 2.10 all-gather's small points
  (the April 2023 runtime, rings only). Its 512 KiB point validates it; the SDK 2.10
  two-instance run agrees only at its largest sizes (docs/validation.md says why).
- ``neuronlink_efficiency``, the share of link bandwidth a large collective achieves: the
  value that makes the model's time equal the measured one at the point marked
  ``"bandwidth"`` (the largest published intra-instance run).

Each fit uses only its own points; every other published point is a validation case
(:func:`predict` gives the model's time for any of them). The catalogue stores the fitted
values; tests re-fit them and check that the stored ones match.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from trnlab import catalog
from trnlab._checks import choose, whole

from ._collective import CollectiveResult, collective
from ._group import group
from ._params import RUNTIMES, FabricError, FabricParams, fabric_params
from ._published import NCCOM_RUNS, NccomRun

__all__ = ["calibrate", "calibrate_link_efficiency", "calibrate_op_overhead", "predict"]


def _system(run: NccomRun):
    if run.system.startswith("2x "):
        return catalog.cluster(run.system[3:], 2)
    return catalog.system(run.system)


def predict(run: NccomRun, nbytes: int, params: FabricParams | None = None) -> CollectiveResult:
    """The model's time for one row of a published run (auto algorithm, the run's chips, the
    run's runtime generation)."""
    params = replace(fabric_params(params), runtime=run.runtime)
    topo = group(_system(run), run.chips, 1, params)
    return collective(run.op, int(nbytes), topo, "auto", params=params)


def _points(role: str, runtime: str | None = None):
    return [(run, s, t) for run in NCCOM_RUNS for s, t, r in run.points()
            if r == role and (runtime is None or run.runtime == runtime)]  # fmt: skip


def calibrate_op_overhead(link_efficiency: float | None = None, runtime: str = "current") -> float:
    """Fixed seconds per collective of one runtime generation: mean residual of its
    ``"fixed cost"`` points."""
    runtime = choose(runtime, RUNTIMES, "runtime", FabricError)
    params = FabricParams(op_overhead=0.0, link_efficiency=link_efficiency)
    points = _points("fixed cost", runtime)
    residual = [t - predict(run, s, params).time for run, s, t in points]
    return float(np.mean(residual))


def calibrate_link_efficiency(op_overhead: float | None = None) -> float:
    """Share of link bandwidth that makes the ``"bandwidth"`` point's time come out right
    (bisection on the efficiency; time falls as it rises)."""
    FabricParams(op_overhead=op_overhead)  # checks the value before 60 bisection steps
    (run, s, measured), *_ = _points("bandwidth")
    lo, hi = 1e-3, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        t = predict(run, s, FabricParams(op_overhead=op_overhead, link_efficiency=mid)).time
        lo, hi = (mid, hi) if t > measured else (lo, mid)
    return (lo + hi) / 2


def calibrate(iterations: int = 4) -> dict[str, float]:
    """The current runtime's fixed cost and the link efficiency, each fitted with the other's
    current value until they settle (``iterations`` rounds, 1 to 20; each takes about a
    second); then the 2023 runtime's fixed cost at that efficiency."""
    iterations = whole(iterations, "iterations", 1, 20, FabricError)
    op, eff = calibrate_op_overhead(1.0), 1.0
    for _ in range(iterations):
        eff = calibrate_link_efficiency(op)
        op = calibrate_op_overhead(eff)
    old = calibrate_op_overhead(eff, runtime="2023")
    return {"op_overhead": op, "op_overhead_2023": old, "neuronlink_efficiency": eff}


def with_defaults(params: FabricParams | None) -> FabricParams:
    """``params`` with every figure resolved (for reports)."""
    p = fabric_params(params)
    return replace(p, op_overhead=p.op, link_efficiency=p.efficiency())
