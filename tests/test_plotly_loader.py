"""plotly's 5 MB widget bundle travels once per kernel, not once per FigureWidget.

(``widgets/_plotly_esm.py``; the browser tests check that figures draw and follow their
controls in JupyterLab, Notebook 7 and Voila with it.)
"""

from __future__ import annotations

import json

import plotly.graph_objs as go
from ipywidgets.widgets.widget import _remove_buffers

from trnlab.widgets import _plotly_esm


def _state_bytes(widget) -> int:
    state, _, buffers = _remove_buffers(widget.get_state())
    return len(json.dumps(state)) + sum(len(b) for b in buffers)


def _bundle_named_in(fig) -> str:
    line = next(s for s in fig._esm.splitlines() if s.startswith("const BUNDLE = "))
    return json.loads(line.removeprefix("const BUNDLE = ").rstrip(";"))


def test_each_figure_sends_a_small_loader_naming_one_bundle_model():
    figs = [go.FigureWidget(go.Scatter(y=[1, 2, 3])) for _ in range(3)]
    named = {_bundle_named_in(f) for f in figs}
    assert len(named) == 1, "every figure of a kernel names the same bundle model"
    bundle = _plotly_esm._bundle
    assert bundle.model_id in named and bundle.comm is not None
    assert len(bundle.source) > 1_000_000, "the bundle model holds plotly's whole bundle"
    assert bundle.source not in figs[0]._esm
    assert all(_state_bytes(f) < 50_000 for f in figs), [_state_bytes(f) for f in figs]


def test_a_closed_bundle_model_is_replaced_for_later_figures():
    first = go.FigureWidget()
    old = _bundle_named_in(first)
    _plotly_esm._bundle.close()  # e.g. a learner's Widget.close_all()
    later = go.FigureWidget()
    assert _bundle_named_in(later) != old
    assert _plotly_esm._bundle.comm is not None and _plotly_esm._bundle.model_id == (
        _bundle_named_in(later)
    )
