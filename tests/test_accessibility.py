"""Accessibility of the dashboards, checked on the widget tree and the figures (no browser):

- every control has a description (its label) and a tooltip a learner understands;
- every colour comes from the Okabe-Ito palette, the documented neutrals, or cividis;
- legend entries of one figure differ in marker symbol, dash, pattern or width, not only colour;
- every dashboard has a text summary, and it follows the dashboard's state;
- the MatmulStepper is operable from the keyboard (a slider and focusable buttons).
"""

from __future__ import annotations

import ipywidgets as W
import plotly.colors
import pytest

from trnlab import kernels
from trnlab.widgets import (
    ChipExplorer,
    CollectiveExplorer,
    FormatExplorer,
    KernelProfile,
    MatmulStepper,
    ScaleExplorer,
)
from trnlab.widgets._style import CIVIDIS_STEPS, NEUTRALS, OKABE_ITO, SEQUENTIAL
from trnlab.widgets._view import _walk

ALLOWED = {c.upper() for c in (*OKABE_ITO, *NEUTRALS, *CIVIDIS_STEPS)} | {"RGBA(0,0,0,0)"}

# Each dashboard in a few states, so the traces each state shows are all checked.
STATES = {
    "ChipExplorer bars": lambda: ChipExplorer(),
    "ChipExplorer scatter": lambda: ChipExplorer(chart="scatter", x_metric="hbm_bandwidth"),
    "ChipExplorer systems": lambda: ChipExplorer(level="system"),
    "FormatExplorer": lambda: FormatExplorer(),
    "MatmulStepper": lambda: MatmulStepper(m=256, k=256, n=512).set(position=7),
    "MatmulStepper pipelined": lambda: MatmulStepper(variant="pipelined", m=256, k=512, n=512),
    "KernelProfile": lambda: KernelProfile(
        kernels.matmul((256, 256), (256, 512), numerics=False), position=10
    ),
    "CollectiveExplorer": lambda: CollectiveExplorer(),
    "CollectiveExplorer switch": lambda: CollectiveExplorer(system="trn3-ultraserver-gen2"),
    "ScaleExplorer": lambda: ScaleExplorer(),
}


@pytest.fixture(scope="module", params=list(STATES))
def dash(request):
    return STATES[request.param]()


def _controls(dash) -> list[W.Widget]:
    return [
        w
        for w in _walk(dash.widget)
        if isinstance(w, (W.ValueWidget, W.Button)) and not isinstance(w, (W.HTML, W.Label))
    ]


# (a) Controls ----------------------------------------------------------------------------------
def test_every_control_has_a_description_and_a_tooltip(dash):
    controls = _controls(dash)
    assert controls
    for w in controls:
        what = f"{type(dash).__name__}: {type(w).__name__} {w.description!r}"
        assert (w.description or "").strip() or (w.tooltip or "").strip(), what
        assert (w.tooltip or "").strip(), f"{what} has no tooltip"
        if isinstance(w, W.ToggleButtons):  # each option explained on hover too
            assert len(w.tooltips) == len(w.options) and all(t.strip() for t in w.tooltips), what


# (b) Colours -----------------------------------------------------------------------------------
def _colours(node, path=""):
    """(path, value) of every colour and colour scale in a figure's dict."""
    if isinstance(node, dict):
        if "bdata" in node:  # a numeric array (colour-mapped values), not colours
            return
        for key, value in node.items():
            here = f"{path}.{key}"
            if key in ("color", "fillcolor", "fgcolor", "bgcolor") and not path.endswith(
                ("hoverlabel", "font", "textfont", "title", "legend")
            ):
                values = value if isinstance(value, (list, tuple)) else [value]
                for v in values:
                    if isinstance(v, str):
                        yield here, v
            elif key == "colorscale":
                yield here, ("scale", value)
            else:
                yield from _colours(value, here)
    elif isinstance(node, (list, tuple)):
        for i, item in enumerate(node):
            yield from _colours(item, f"{path}[{i}]")


def _stops(scale) -> list[tuple[float, str]]:
    stops = plotly.colors.get_colorscale(scale) if isinstance(scale, str) else scale
    return [(round(float(p), 6), c.lower()) for p, c in stops]


def test_every_colour_is_okabe_ito_a_neutral_or_cividis(dash):
    for fig in dash.figures():
        d = fig.to_dict()
        d["layout"].pop("template", None)  # plotly's defaults, overridden by what we set
        for where, value in _colours(d):
            if isinstance(value, tuple):  # plotly stores a named scale as its stops
                assert _stops(value[1]) == _stops(SEQUENTIAL), (type(dash).__name__, where)
            else:
                assert value.replace(" ", "").upper() in ALLOWED, (
                    type(dash).__name__,
                    where,
                    value,
                )


# (c) Not colour alone --------------------------------------------------------------------------
def _has_points(t) -> bool:
    return any(v is not None and len(v) for v in (t.x, t.y))


def _look(t) -> tuple:
    """What tells a legend entry apart besides colour."""
    if t.type == "bar":
        pattern = t.marker.pattern.shape or ""
        outline_only = t.marker.color in ("rgba(0,0,0,0)",)
        return ("bar", pattern, outline_only)
    mode = set((t.mode or "lines").split("+"))
    look = ["scatter", tuple(sorted(mode))]
    if "lines" in mode:
        look += [t.line.dash or "solid", t.line.width]
    if "markers" in mode:
        sym = t.marker.symbol
        look.append(sym[0] if isinstance(sym, (list, tuple)) and sym else sym or "circle")
    return tuple(look)


def test_legend_entries_differ_by_more_than_colour(dash):
    for fig in dash.figures():
        if fig.layout.showlegend is False:
            continue
        entries, groups = [], set()
        for t in fig.data:
            if t.visible not in (None, True) or t.showlegend is False or t.type == "heatmap":
                continue
            if t.legendgroup and t.legendgroup in groups:
                continue
            groups.add(t.legendgroup)
            if _has_points(t):
                entries.append((t.name, _look(t)))
        looks = [look for _, look in entries]
        clashes = [e for e in entries if looks.count(e[1]) > 1]
        assert not clashes, f"{fig.layout.title.text!r}: told apart by colour only: {clashes}"


# (d) Text summaries ----------------------------------------------------------------------------
CHANGES = {
    ChipExplorer: {"metric": "hbm_bandwidth"},
    FormatExplorer: {"rounding": "stochastic"},
    MatmulStepper: {"position": 3},
    KernelProfile: {"position": 2},
    CollectiveExplorer: {"op": "all_gather"},
    ScaleExplorer: {"dtype": "fp8"},
}


@pytest.mark.parametrize("cls", list(CHANGES), ids=lambda c: c.__name__)
def test_each_dashboard_has_a_text_summary_that_follows_its_state(cls):
    dash = next(build() for name, build in STATES.items() if name.startswith(cls.__name__))
    before = dash.summary_text()
    assert len(before.split()) >= 8, before
    dash.set(**CHANGES[cls])
    after = dash.summary_text()
    assert after.strip() and after != before


# (e) Keyboard ----------------------------------------------------------------------------------
def test_the_matmul_stepper_is_operable_from_the_keyboard():
    s = MatmulStepper(m=256, k=256, n=512)
    tree = list(_walk(s.widget))
    # The step control is a slider: focus it and the arrow keys move it.
    assert isinstance(s.position, W.IntSlider) and s.position in tree
    assert not s.position.disabled and s.position.max == s.model.cursor.n_steps > 0
    assert s.position.description and s.position.tooltip
    # Step buttons are real Buttons (Tab reaches them, Enter/Space presses them), labelled.
    assert {"first", "back", "step", "next_matmul", "last"} <= set(s.buttons)
    for b in s.buttons.values():
        assert isinstance(b, W.Button) and b in tree and not b.disabled
        assert b.description.strip() and b.tooltip.strip()
    assert isinstance(s.play, W.Play) and s.play in tree and s.play.description
    # Pressing a button (what Enter does on a focused button) moves the cursor and the slider.
    start = s.model.position
    s.buttons["step"].click()
    assert s.model.position == start + 1 == s.position.value
    s.position.value = 0  # what an arrow key does
    assert s.model.position == 0
