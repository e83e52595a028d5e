"""KernelProfile: the engine timeline, memories and counters of any kernel run.

Give it the :class:`trnlab.core.Run` of a kernel you wrote (``core.run(my_kernel, ...)``) or of
a reference kernel; step or play a cursor through it as in the matmul stepper. The model is a
:class:`~trnlab.widgets.stepper_model.RunCursor`.
"""

from __future__ import annotations

import html

import ipywidgets as W

from trnlab import core
from trnlab._errors import TrnlabTypeError

from ._view import Dashboard
from .stepper_charts import GanttChart, MemoryMap, RooflineChart, counters_table
from .stepper_model import RunCursor

__all__ = ["KernelProfile"]


class KernelProfile(Dashboard):
    """Profile one kernel run: timeline with a cursor, SBUF/PSUM map, roofline, counters.

    Parameters
    ----------
    run : trnlab.core.Run
        The run to show.
    position : int
        The step the cursor starts at (default: the end, where the counters are the totals).

    Examples
    --------
    >>> from trnlab import kernels
    >>> from trnlab.widgets import KernelProfile
    >>> KernelProfile(kernels.matmul((512, 512), (512, 512), numerics=False))  # doctest: +SKIP
    """

    def __init__(self, run: core.Run, position: int | None = None) -> None:
        super().__init__()
        if not isinstance(run, core.Run):
            raise TrnlabTypeError(
                f"KernelProfile shows a trnlab.core.Run (from core.run or kernels.matmul), "
                f"not {type(run).__name__}"
            )
        self.model = RunCursor(run)
        self.model.set(position=self.model.n_steps if position is None else position)
        n = self.model.n_steps
        style = {"description_width": "initial"}
        self.position = W.IntSlider(
            value=self.model.position,
            min=0,
            max=n,
            description="Step",
            tooltip="drag, or click and use the arrow keys",
            style=style,
            layout={"width": "480px"},
        )
        self.play = W.Play(
            value=self.model.position,
            min=0,
            max=n,
            interval=300,
            description="Play",
            tooltip="play through the steps (one every 0.3 s)",
        )
        W.link((self.play, "value"), (self.position, "value"))
        self.buttons = {}
        for key, label, tip, move in (
            ("first", "|<", "first step", self.model.first),
            ("back", "<", "one step back", self.model.back),
            ("step", ">", "one step forward", self.model.step),
            ("last", ">|", "end of the run", self.model.last),
        ):
            b = W.Button(description=label, tooltip=tip, layout={"width": "auto"})
            b.on_click(lambda _, move=move: self._move(move))
            self.buttons[key] = b
        self.step_text = W.HTML()
        self.summary = W.HTML(f"<pre>{html.escape(run.summary())}</pre>")
        self.counters = W.HTML()
        self.gantt = GanttChart()
        self.memory = MemoryMap()
        self.roofline = RooflineChart()
        self.gantt.draw_run(self.model)
        self.roofline.draw_run(self.model)
        self._bind(self.position)
        self.widget = W.VBox(
            [
                self.summary,
                W.HBox([*self.buttons.values(), self.play, self.position]),
                self.message,
                self.step_text,
                self.gantt.fig,
                W.HBox([self.memory.fig, self.counters]),
                self.roofline.fig,
            ]
        )
        self.redraw()

    def _apply(self, change) -> None:
        self.model.set(position=self.position.value)

    def _move(self, move) -> None:
        move()
        self._sync()
        self.redraw()

    def _sync_controls(self) -> None:
        self.position.value = self.play.value = self.model.position

    def redraw(self) -> None:
        c = self.model
        self.gantt.draw_cursor(c)
        self.memory.draw(c)
        self.roofline.draw_cursor(c)
        self.step_text.value = f"<p><b>{html.escape(c.describe())}</b></p>"
        self.counters.value = (
            counters_table(c) + f"<p style='max-width:420px'>{html.escape(c.summary())}</p>"
        )
