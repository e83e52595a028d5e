"""MatmulStepper: step a tiled matmul through a NeuronCore, instruction by instruction.

Controls choose the generation, M/K/N, the format, the tile sizes and the kernel variant; the
step buttons (Tab to them, Enter or Space to press), the step slider (arrow keys) and the play
button move a cursor through the instructions in the order they start. Views: A, B and C in
HBM (how often each part has been moved, and the tiles in flight), the SBUF map and the PSUM
banks, the engine timeline with the cursor, the running counters and the roofline. The model
is :class:`~trnlab.widgets.stepper_model.MatmulStepperModel`.
"""

from __future__ import annotations

import html

import ipywidgets as W

from ._view import Dashboard
from .stepper_charts import GanttChart, HBMChart, MemoryMap, RooflineChart, counters_table
from .stepper_model import (
    DEFAULT_TILE,
    FORMATS,
    TILE_K_OPTIONS,
    TILE_M_OPTIONS,
    TILE_N_OPTIONS,
    TILE_VARIANTS,
    MatmulStepperModel,
)

__all__ = ["MatmulStepper"]

_VARIANT_TIPS = {
    "tiled": "load an A and a B tile for every matmul",
    "hoisted": "load A's K strip once per M tile",
    "blocked_mn": "keep 2 x 2 blocks of A and B in SBUF over all of K",
    "blocked_mnk": "block K too (16 x 2 x 8 tiles), accumulate partial sums in SBUF",
    "pipelined": "blocked_mnk with a third buffer per block: loads run further ahead",
}


class MatmulStepper(Dashboard):
    """Step C = A @ B through SBUF and PSUM on one NeuronCore.

    Parameters are those of :class:`~trnlab.widgets.stepper_model.MatmulStepperModel`.

    Examples
    --------
    >>> from trnlab.widgets import MatmulStepper
    >>> MatmulStepper(variant="tiled", m=256, k=512, n=1024)  # doctest: +SKIP
    """

    def __init__(self, **settings) -> None:
        super().__init__()
        self.model = MatmulStepperModel(**settings)
        m = self.model
        style = {"description_width": "initial"}
        small = {"width": "150px"}
        self.chip = W.Dropdown(
            options=m.chips(),
            value=m.chip,
            description="Chip",
            tooltip="the generation whose NeuronCore runs the kernel",
            style=style,
        )
        self.variant = W.ToggleButtons(
            options=list(m.variants),
            value=m.variant,
            description="Kernel",
            tooltip="the kernel schedule: how tiles move between HBM, SBUF and PSUM",
            tooltips=[_VARIANT_TIPS[v] for v in m.variants],
            style={"description_width": "initial", "button_width": "100px"},
        )
        self.dtype = W.Dropdown(
            options=list(FORMATS),
            value=m.dtype,
            description="Format",
            tooltip="format of A and B (PSUM accumulates in fp32)",
            style=style,
            layout=small,
        )
        self.sizes = {}
        for dim, tip in (
            ("m", "rows of A and C"),
            ("k", "the contraction: columns of A, rows of B"),
            ("n", "columns of B and C"),
        ):
            # IntText, not BoundedIntText: a bounded box would clamp 0 to 1 or 100000 to
            # 65536 without a word; the model refuses such a size and says its limit.
            self.sizes[dim] = W.IntText(
                value=getattr(m, dim),
                step=128,
                description=dim.upper(),
                tooltip=tip,
                continuous_update=False,
                style=style,
                layout={"width": "130px"},
            )
        self.tiles = {}
        for dim, opts, tip in (
            ("tile_k", TILE_K_OPTIONS, "partitions of a tile: K rows contracted per matmul"),
            ("tile_m", TILE_M_OPTIONS, "stationary free size: columns of the PE array used"),
            ("tile_n", TILE_N_OPTIONS, "moving free size: fp32 accumulators in a PSUM bank"),
        ):
            self.tiles[dim] = W.Dropdown(
                options=list(opts),
                value=getattr(m, dim),
                description=f"tile {dim[-1].upper()}",
                tooltip=tip,
                style=style,
                layout={"width": "140px"},
            )
        self.position = W.IntSlider(
            value=m.position,
            min=0,
            max=m.cursor.n_steps,
            description="Step",
            tooltip="drag, or click and use the arrow keys",
            continuous_update=True,
            style=style,
            layout={"width": "480px"},
        )
        self.play = W.Play(
            value=m.position,
            min=0,
            max=m.cursor.n_steps,
            interval=300,
            description="Play",
            tooltip="play through the steps (one every 0.3 s)",
        )
        W.link((self.play, "value"), (self.position, "value"))
        self.buttons = {}
        for key, label, tip, move in (
            ("first", "|<", "first step", lambda: self.model.first()),
            ("back", "<", "one step back", lambda: self.model.back()),
            ("step", ">", "one step forward", lambda: self.model.step()),
            ("next_matmul", "next matmul", "forward to the next matmul", self._next_matmul),
            ("last", ">|", "end of the run", lambda: self.model.last()),
        ):
            b = W.Button(description=label, tooltip=tip, layout={"width": "auto"})
            b.on_click(lambda _, move=move: self._move(move))
            self.buttons[key] = b
        self.step_text = W.HTML()
        self.summary = W.HTML()
        self.counters = W.HTML()
        self.hbm = HBMChart(("A in HBM", "B in HBM", "C in HBM"))
        self.memory = MemoryMap()
        self.gantt = GanttChart()
        self.roofline = RooflineChart()
        self._bind(
            self.chip,
            self.variant,
            self.dtype,
            *self.sizes.values(),
            *self.tiles.values(),
            self.position,
        )
        self._drawn = -1
        settings_box = W.VBox(
            [
                self.variant,
                W.HBox([self.chip, self.dtype, *self.sizes.values()]),
                W.HBox(list(self.tiles.values())),
            ]
        )
        stepping = W.HBox([*self.buttons.values(), self.play, self.position])
        self.widget = W.VBox(
            [
                settings_box,
                self.message,
                self.summary,
                stepping,
                self.step_text,
                self.hbm.fig,
                W.HBox([self.memory.fig, self.counters]),
                self.gantt.fig,
                self.roofline.fig,
            ]
        )
        self._sync()
        self.redraw()

    # Controls -> model ----------------------------------------------------------------------
    def _apply(self, change) -> None:
        if change["owner"] is self.position:
            self.model.set(position=self.position.value)
            return
        tiles = {k: w.value for k, w in self.tiles.items()}
        if change["owner"] is self.variant and self.variant.value not in TILE_VARIANTS:
            # a variant built from fixed tiles: take them, rather than refuse the switch
            tiles = dict(zip(("tile_k", "tile_m", "tile_n"), DEFAULT_TILE, strict=True))
        self.model.set(
            chip=self.chip.value,
            variant=self.variant.value,
            dtype=self.dtype.value,
            **{k: w.value for k, w in self.sizes.items()},
            **tiles,
        )

    def _next_matmul(self) -> None:
        self.model.next_op("matmul")

    def _move(self, move) -> None:
        move()
        self._sync()
        self.redraw()

    def _sync_controls(self) -> None:
        m = self.model
        self.chip.value, self.variant.value, self.dtype.value = m.chip, m.variant, m.dtype
        for k, w in self.sizes.items():
            w.value = getattr(m, k)
        for k, w in self.tiles.items():
            w.value = getattr(m, k)
            w.disabled = m.variant not in TILE_VARIANTS
        n = m.cursor.n_steps
        for w in (self.position, self.play):
            if w.value > n:
                w.value = n
            w.max = n
            w.value = m.position

    # Model -> picture -----------------------------------------------------------------------
    def redraw(self) -> None:
        m = self.model
        c = m.cursor
        if self._drawn != m.revision:
            self.gantt.draw_run(c)
            self.roofline.draw_run(c)
            self.summary.value = f"<p>{html.escape(m.summary())}</p>"
            self._drawn = m.revision
        pics = m.matrices()
        self.hbm.draw(
            list(pics.values()),
            [
                f"A [{m.m} x {m.k}]: {pics['A'].kind}",
                f"B [{m.k} x {m.n}]: {pics['B'].kind}",
                f"C [{m.m} x {m.n}]: {pics['C'].kind}",
            ],
            "A, B and C in HBM: how many times each part has been moved so far",
        )
        self.memory.draw(c)
        self.gantt.draw_cursor(c)
        self.roofline.draw_cursor(c)
        self.step_text.value = f"<p><b>{html.escape(c.describe())}</b></p>"
        self.counters.value = (
            counters_table(c) + f"<p style='max-width:420px'>{html.escape(c.summary())}</p>"
        )
