"""ScaleExplorer: a training job on a system, where the memory and the time go, and other chips.

Left: memory per chip stacked by kind against the usable HBM. Middle: the step time broken
into compute, pipeline bubble and exposed communication. Right: the same job on other chips
at the same chip count (compute and memory only). The model is
:class:`~trnlab.widgets.scale_model.ScaleModel`.
"""

from __future__ import annotations

import html

import ipywidgets as W
import plotly.graph_objects as go

from trnlab import scale

from ._html import table
from ._style import base_layout, colour
from ._view import Dashboard
from .scale_model import DTYPES, ScaleModel

__all__ = ["ScaleExplorer"]

_MEMORY_KINDS = ("weights", "gradients", "optimizer", "activations")
_PATTERNS = ("", "/", "x", ".")  # told apart by pattern as well as colour


class ScaleExplorer(Dashboard):
    """Plan a training job: memory stack, step-time breakdown, MFU, cost, energy, other chips.

    Parameters are those of :class:`~trnlab.widgets.scale_model.ScaleModel`.
    """

    def __init__(self, **settings) -> None:
        super().__init__()
        self.model = ScaleModel(**settings)
        m = self.model
        self.memory = go.FigureWidget(layout=base_layout("Memory per chip", 380))
        for i, kind in enumerate(_MEMORY_KINDS):
            self.memory.add_bar(
                name=kind,
                marker={"color": colour(i), "pattern": {"shape": _PATTERNS[i]}},
                hoverinfo="name+y",
            )
        # The capacity is one value per bar: a wide black tick (a marker), styled once here.
        # Redraws change only x/y: replacing a whole marker object from Python trips plotly.js
        # in the browser ("Cannot use 'in' operator to search for 'line'").
        self.memory.add_scatter(
            name="usable HBM",
            mode="markers",
            marker={"symbol": "line-ew-open", "size": 60, "color": "#000000", "line": {"width": 3}},
        )
        self.memory.update_layout(barmode="stack", yaxis_title="GiB per chip")
        self.step = go.FigureWidget(layout=base_layout("Where a training step goes", 380))
        self.step.add_bar(orientation="h", marker={"color": colour(0)}, hoverinfo="x+y")
        self.step.update_layout(xaxis_title="seconds per step")
        self.chips = go.FigureWidget(
            layout=base_layout("Same job, same chip count, other chips", 380)
        )
        self.chips.add_bar(marker={"color": colour(2)}, hoverinfo="text")
        self.chips.update_layout(yaxis_title="days to train (compute only)")
        style = {"description_width": "initial"}

        def pick(setting, options, description, tooltip, width):
            return W.Dropdown(
                options=options, value=getattr(m, setting), description=description,
                tooltip=tooltip, style=style, layout={"width": width},
            )  # fmt: skip

        # One control per model setting, keyed by the setting's name: _apply and
        # _sync_controls walk this table, so a new setting is added in one place.
        self.controls: dict[str, W.ValueWidget] = {
            "model": pick("model", m.models(), "Model", "a preset transformer", "260px"),
            "system": pick("system", m.systems(), "System", "an instance or UltraServer", "320px"),
            # IntText, not BoundedIntText: the model refuses a bad number and says why; a
            # bounded box would clamp it silently
            "count": W.IntText(
                value=m.count,
                description="x count",
                style=style,
                tooltip="UltraCluster: how many of the system, joined by EFA",
                layout={"width": "170px"},
            ),
            "dtype": W.ToggleButtons(
                options=DTYPES,
                value=m.dtype,
                description="Format",
                style=style,
                tooltip="number format of the matmuls",
                tooltips=["BF16 matmuls", "FP8 matmuls", "MXFP8 matmuls (Trainium3)"],
            ),
            "auto": W.Checkbox(
                value=m.auto,
                description="best split (search)",
                indent=False,
                tooltip="ignore the split below and use the search's best plan",
            ),
            # degrees with factors of 3 too: inf2.48xlarge has 12 chips, a Trn3 Gen2
            # UltraServer 144 (splits of 9 or 18 are the only ones that leave a
            # power-of-two data-parallel degree)
            "tp": pick(
                "tp",
                [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64],
                "tp",
                "tensor parallel degree",
                "120px",
            ),
            "cp": pick("cp", [1, 2, 4, 8], "cp", "context (sequence) parallel degree", "120px"),
            "pp": pick(
                "pp",
                [1, 2, 3, 4, 5, 6, 8, 9, 10, 12, 16, 18, 24, 32],
                "pp",
                "pipeline stages",
                "120px",
            ),
            "ep": pick("ep", [1, 2, 4, 8], "ep", "expert parallel degree (MoE)", "120px"),
            "zero": pick("zero", [0, 1, 2, 3], "ZeRO", "optimizer-state sharding stage", "130px"),
            "micro_batch": pick(
                "micro_batch", [1, 2, 4, 8], "micro-batch", "sequences per micro-batch", "170px"
            ),
            "recompute": W.Dropdown(
                options=list(scale.RECOMPUTE),
                value=m.recompute,
                description="recompute",
                tooltip="activation recomputation: none, selective (the attention core) or "
                "full (whole layers)",
                style=style,
                layout={"width": "190px"},
            ),
            "global_batch": W.IntText(
                value=m.global_batch,
                description="global batch",
                tooltip="sequences per optimizer step",
                style=style,
                layout={"width": "210px"},
            ),
            "seq_len": pick(
                "seq_len",
                [1024, 2048, 4096, 8192, 16384],
                "sequence",
                "tokens per sequence",
                "190px",
            ),
        }
        for name, control in self.controls.items():  # e.tp, e.dtype, ... for code and tests
            setattr(self, "model_choice" if name == "model" else name, control)
        self.summary = W.HTML()
        self.table = W.HTML()
        # The search (best split) runs on a worker thread: the kernel stays free, this bar
        # follows it and Cancel stops it; the last plan stays drawn meanwhile.
        self.progress = W.FloatProgress(
            value=0.0, min=0.0, max=1.0, description="search", style=style,
            tooltip="share of the candidate plans evaluated", layout={"width": "260px"},
        )  # fmt: skip
        self.cancel = W.Button(
            description="Cancel search", tooltip="stop the running search; keep the last plan",
            disabled=True,
        )  # fmt: skip
        self.cancel.on_click(lambda _: self.job.cancel() if self.job else None)
        self.job = None
        self._bind(*self.controls.values())
        c = self.controls
        row = [c[k] for k in ("tp", "cp", "pp", "ep", "zero", "micro_batch", "recompute")]
        self.widget = W.VBox(
            [
                W.HBox([c["model"], c["system"], c["count"]]),
                W.HBox([c["dtype"], c["auto"], self.progress, self.cancel]),
                W.HBox(row),
                W.HBox([c["global_batch"], c["seq_len"]]),
                self.message,
                W.HBox([self.memory, self.step, self.chips]),
                self.summary,
                self.table,
            ]
        )
        self.redraw()

    # Controls -> model ----------------------------------------------------------------------
    _SPLIT = ("tp", "cp", "pp", "ep", "zero", "micro_batch", "recompute")

    def _apply(self, change) -> None:
        self.model.set(**{name: control.value for name, control in self.controls.items()})

    def _on_change(self, change) -> None:
        """Splits chosen by hand are planned at once; the search runs on a worker thread."""
        if self._syncing:
            return
        wanted = {name: control.value for name, control in self.controls.items()}
        if not wanted["auto"]:
            super()._on_change(change)
            return
        if self.job is not None and not self.job.done:
            self.job.cancel()
            self.job.wait()
        try:
            self.job = self.model.set_async(
                on_progress=self._on_progress, on_done=self._on_done, **wanted
            )
        except ValueError as err:
            self.show_error(err)
            self._sync()
            return
        self.message.value = "<i>searching every split...</i>"
        self.progress.value = 0.0
        self.cancel.disabled = False

    def _on_progress(self, share: float) -> None:
        self.progress.value = share

    def _on_done(self, job) -> None:
        """Runs on the worker thread when a search ends: draw it, or say why not."""
        self.cancel.disabled = True
        if job.cancelled:
            self.message.value = "<i>search cancelled: the last plan is still shown</i>"
            self._sync()
            return
        if job.error is not None:
            self.show_error(job.error)
            self._sync()
            return
        self.message.value = ""
        self.progress.value = 1.0
        self._sync()
        self.redraw()

    def _sync_controls(self) -> None:
        for name, control in self.controls.items():
            control.value = getattr(self.model, name)
            if name in self._SPLIT:
                control.disabled = self.model.auto

    # Model -> picture -----------------------------------------------------------------------
    def redraw(self) -> None:
        m = self.model
        r = m.result
        gib = 2**30
        stack = m.memory_stack()
        label = [str(r.parallel)]
        with self.memory.batch_update():
            for trace, kind in zip(self.memory.data[:4], _MEMORY_KINDS, strict=True):
                trace.x, trace.y = label, [stack[kind] / gib]
            cap = self.memory.data[4]
            cap.x, cap.y = label, [stack["capacity"] / gib]
        steps = {k: v for k, v in m.step_breakdown().items() if v > 0}
        with self.step.batch_update():
            bar = self.step.data[0]
            bar.y, bar.x = list(steps), list(steps.values())
            bar.marker.color = [colour(i) for i in range(len(steps))]
        rows = m.compare_chips() if r.feasible else []
        with self.chips.batch_update():
            bar = self.chips.data[0]
            bar.x = [c.name for c in rows]
            bar.y = [c.days or 0 for c in rows]
            bar.text = [f"{c.days:,.1f} d" if c.days else "n/a" for c in rows]
            bar.hovertext = [
                f"{c.name}: {c.days:,.1f} days; memory {'fits' if c.fits else 'does not fit'}"
                + (f"; ${c.cost:,.0f}" if c.cost else "")
                + (f"; {c.energy_mwh:,.0f} MWh" if c.energy_mwh else "")
                if c.days
                else f"{c.name}: {c.note}"
                for c in rows
            ]
        if not r.feasible:  # a valid question with a "no" for an answer: say why, plainly
            self.show_error("This split cannot run: " + "; ".join(r.problems))
        self.summary.value = f"<p>{html.escape(m.summary())}</p>"
        self.table.value = _table(rows)


def _table(rows) -> str:
    return table(
        ("chip", "days", "memory fits", "cost", "energy", "note"),
        (
            (
                c.name,
                f"{c.days:,.1f}" if c.days else "n/a",
                {True: "yes", False: "no", None: "n/a"}[c.fits],
                f"${c.cost:,.0f}" if c.cost else "n/a",
                f"{c.energy_mwh:,.0f} MWh" if c.energy_mwh else "n/a",
                c.note,
            )
            for c in rows
        ),
        note="Compute and memory only, at the same chip count and split: communication is left "
        "out for every chip alike. For a full plan on GPUs, choose a GPU system (p5.48xlarge, "
        "p6-b200.48xlarge, gb200-nvl72...) above.",
    )
