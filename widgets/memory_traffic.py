"""MemoryTraffic: where a kernel run's bytes went, as a picture and as a table beside it.

Each HBM tensor of the run is drawn as a grid coloured by how many times each part of it
crossed HBM (loads for an input, stores for an output; 1 everywhere is the minimum), with the
bytes per tensor and the bytes along each path between HBM, SBUF, PSUM and the engines in a
table beside it. The pictures are the matmul stepper's HBM heat maps (:class:`HBMChart` over a
:class:`~trnlab.widgets.stepper_model.RunCursor` at the end of the run); the figures come from
:func:`trnlab.core.hbm_traffic` and :func:`trnlab.core.traffic`.
"""

from __future__ import annotations

import html

import ipywidgets as W

from trnlab import core
from trnlab._checks import flag
from trnlab._errors import TrnlabTypeError
from trnlab.units import si

from ._view import Dashboard
from .stepper_charts import HBMChart
from .stepper_model import RunCursor

__all__ = ["MemoryTraffic"]


def _times(moved: float, size: float) -> str:
    return f"{moved / size:.1f}x" if size else "-"


def traffic_table(run: core.Run, structure: bool = True) -> str:
    """The bytes per HBM tensor (against its size) and along each on-chip path, as HTML.
    ``structure=False`` leaves out the transfers and the on-chip paths, which would say how
    the kernel is built (a reference solution shown as the target before a learner's try)."""
    rows = []
    for name, t in core.hbm_traffic(run).items():
        transfers = int(t["loads"] + t["stores"]) if structure else "-"
        rows.append(
            f"<tr><td style='text-align:left'>{html.escape(name)}</td>"
            f"<td>{si(t['size'], 'B')}</td><td>{si(t['loaded'], 'B')}</td>"
            f"<td>{si(t['stored'], 'B')}</td>"
            f"<td>{_times(t['loaded'] + t['stored'], t['size'])}</td>"
            f"<td>{transfers}</td></tr>"
        )
    if structure:
        paths = "; ".join(f"{a} &rarr; {b} {si(v, 'B')}" for (a, b), v in core.traffic(run).items())
        on_chip = f"On chip: {paths}."
    else:
        on_chip = (
            "On chip: shown once your own kernel has run (the path through SBUF, PSUM and the "
            "engines, and the number of transfers, would say how this one is built)."
        )
    return (
        "<table><thead><tr><th style='text-align:left'>HBM tensor</th><th>size</th>"
        "<th>loaded</th><th>stored</th><th>crossed HBM</th><th>transfers</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        f"<p style='max-width:520px'>{on_chip}</p>"
    )


class MemoryTraffic(Dashboard):
    """The memory traffic of one kernel run: HBM heat maps per tensor and a table of bytes.

    Parameters
    ----------
    run : trnlab.core.Run
        The run to show (from ``nki.profile`` or ``core.run``).
    title : str
        What the run is (shown above the pictures); default: the run's summary line.
    structure : bool
        Show the transfers per tensor and the on-chip paths (default). False shows only what
        crossed HBM: the target, when the run is a reference solution a learner has not yet
        tried to match.

    Examples
    --------
    >>> from trnlab import kernels
    >>> from trnlab.widgets import MemoryTraffic
    >>> MemoryTraffic(kernels.matmul((256, 256), (256, 512), numerics=False))  # doctest: +SKIP
    """

    def __init__(self, run: core.Run, title: str = "", structure: bool = True) -> None:
        super().__init__()
        self.structure = flag(structure, "MemoryTraffic(structure=...)", TrnlabTypeError)
        if not isinstance(run, core.Run):
            raise TrnlabTypeError(
                f"MemoryTraffic shows a trnlab.core.Run (from nki.profile or core.run), "
                f"not {type(run).__name__}"
            )
        if not isinstance(title, str):
            raise TrnlabTypeError(
                f"MemoryTraffic's title is a string (what the run is), not {type(title).__name__}"
            )
        self.model = RunCursor(run)
        self.model.set(position=self.model.n_steps)
        self.names = tuple(t.name for t in run.program.tensors)
        self.title = title or (
            f"{run.params.name}: {len(run.program)} instructions, {run.latency * 1e6:,.2f} us"
        )
        self.chart = HBMChart(self.names, height=300)
        self.table = W.HTML()
        self.widget = W.VBox([self.message, self.chart.fig, self.table])
        self.redraw()

    def _apply(self, change) -> None:  # no controls: the picture is of one finished run
        pass

    def _sync_controls(self) -> None:
        pass

    def redraw(self) -> None:
        run = self.model.run
        traffic = core.hbm_traffic(run)
        pictures = [self.model.hbm(n) for n in self.names]
        titles = [
            f"{n} ({pic.kind}: {_times(traffic[n]['loaded'] + traffic[n]['stored'], traffic[n]['size'])})"
            for n, pic in zip(self.names, pictures, strict=True)
        ]
        self.chart.draw(pictures, titles, f"HBM traffic: {self.title}")
        self.table.value = traffic_table(run, self.structure)
