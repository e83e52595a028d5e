"""What every dashboard view shares: controls bound to a model, errors shown as messages.

A view subclasses :class:`Dashboard`, builds its controls and figures, then calls
:meth:`Dashboard._bind`. A control change calls :meth:`_apply` (which only calls
``model.set``); if the model refuses, the message shows why and the last good view stays.

Displayed, a dashboard offers the live widget view and, beside it, a static ``text/html``
picture (its charts as inline SVG, its settings and its text) and a ``text/plain`` summary:
a live front end shows the widget; an HTML export or a notebook viewer, where widgets cannot
run, shows the picture as it was when the cell ran.
"""

from __future__ import annotations

import html
from abc import ABC, abstractmethod
from copy import deepcopy

import ipywidgets as W
from plotly.basewidget import BaseFigureWidget

from ._html import text_of
from ._static import figure_svg

__all__ = ["Dashboard"]

_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _walk(w: W.Widget):
    """The widget tree in display order (Accordion and Tab children included)."""
    yield w
    for child in getattr(w, "children", ()) or ():
        yield from _walk(child)


def _setting(w: W.ValueWidget) -> str | None:
    """ "Description = value" of a control, as the learner reads it (option labels)."""
    if not w.description or isinstance(w, (W.Play, W.HTML, W.Label)):
        return None
    value = getattr(w, "label", w.value)
    if isinstance(value, tuple):
        value = ", ".join(map(str, value))
    elif isinstance(w, W.Checkbox):
        value = "on" if w.value else "off"
    return f"{w.description} = {value}"


def _static(w: W.Widget) -> str:
    """Static HTML of a widget subtree: figures as SVG, HTML as is, boxes as boxes."""
    if isinstance(w, BaseFigureWidget):
        return f"<div>{figure_svg(w)}</div>"
    if isinstance(w, W.HTML):
        return f"<div>{w.value}</div>" if w.value else ""
    if isinstance(w, W.Accordion):
        titles = list(w.titles) + [""] * len(w.children)
        return "".join(
            f"<details><summary>{html.escape(t or 'more')}</summary>{_static(c)}</details>"
            for c, t in zip(w.children, titles, strict=False)
        )
    if isinstance(w, W.Box):
        inner = "".join(_static(c) for c in w.children)
        if not inner:
            return ""
        if isinstance(w, W.HBox):
            return f'<div style="display:flex;flex-wrap:wrap;gap:8px">{inner}</div>'
        return f"<div>{inner}</div>"
    return ""  # a control: listed once, as a setting, above the picture


class Dashboard(ABC):
    """Base of the dashboards: ``model`` + ``widget`` + ``redraw()``."""

    model: object
    widget: W.Widget

    def __init__(self) -> None:
        self.message = W.HTML()
        self._syncing = False

    def _repr_mimebundle_(self, include=None, exclude=None, **kwargs):
        self._snapshot_figures()
        bundle = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = self.summary_text()
        bundle["text/html"] = self.static_html()
        if include:
            bundle = {k: v for k, v in bundle.items() if k in include or k == _WIDGET_VIEW}
        return {k: v for k, v in bundle.items() if k not in (exclude or ())}

    def _snapshot_figures(self) -> None:
        """Put each figure's whole current picture into its synced widget state.

        A FigureWidget's synced state (``_widget_data`` / ``_widget_layout``) is its picture as
        built; later edits (``add_trace``, ``batch_update``, ...) travel only as one-shot
        ``_py2js_*`` messages, which only a front end already holding the widget receives.
        plotly refreshes that state in ``FigureWidget._repr_mimebundle_``, but a figure inside
        a box is never displayed on its own, so we do it here. Without it, a front end that
        fetches the widgets' state after the cells ran (Voila; a reloaded JupyterLab page)
        draws every figure as it was built: empty, or without its title.
        """
        for fig in self.figures():
            fig._widget_layout = deepcopy(fig._layout_obj._props)
            fig._widget_data = deepcopy(fig._data)

    # What the dashboard shows, for the static fallback and for tests -------------------------
    def figures(self) -> list[BaseFigureWidget]:
        """The plotly figures the dashboard draws, in display order."""
        return [w for w in _walk(self.widget) if isinstance(w, BaseFigureWidget)]

    def summary_text(self) -> str:
        """The dashboard's text beside its charts (summaries, step, counters, tables, errors),
        as plain text in display order."""
        blocks = (text_of(w.value) for w in _walk(self.widget) if isinstance(w, W.HTML))
        return "\n".join(b for b in blocks if b)

    def settings_text(self) -> str:
        """The controls' current settings, "Description = value; ..."."""
        found = (_setting(w) for w in _walk(self.widget) if isinstance(w, W.ValueWidget))
        return "; ".join(s for s in found if s)

    def static_html(self) -> str:
        """A static picture of the dashboard as it is now: settings, charts (inline SVG, no
        scripts) and text, for front ends that cannot run widgets."""
        name = type(self).__name__
        settings = self.settings_text()
        return (
            f'<div class="trnlab-static" role="group" aria-label="{name} (static picture)">'
            f"<p><b>{name}</b>{': ' + html.escape(settings) if settings else ''}</p>"
            f"{_static(self.widget)}"
            "<p><i>A static picture of this dashboard as it was drawn; run the notebook for "
            "the live, interactive one.</i></p></div>"
        )

    def _bind(self, *controls: W.ValueWidget) -> None:
        for control in controls:
            control.observe(self._on_change, names="value")

    def _on_change(self, change) -> None:
        if self._syncing:
            return
        try:
            self._apply(change)
        except ValueError as err:
            self.show_error(err)
            self._sync()  # put the controls back to the state the picture shows
            return
        self.message.value = ""
        self._sync()
        try:
            self.redraw()
        except ValueError as err:  # a setting the model took but cannot draw: say so, stay alive
            self.show_error(err)

    def show_error(self, err: Exception) -> None:
        # Vermillion (Okabe-Ito) plus a warning sign: not colour alone.
        self.message.value = f'<span style="color:#D55E00">&#9888; {html.escape(str(err))}</span>'

    def _sync(self) -> None:
        """Copy the model's state back into the controls without re-triggering them."""
        self._syncing = True
        try:
            self._sync_controls()
        finally:
            self._syncing = False

    def set(self, **changes):
        """Change settings from code (the model's names), then redraw."""
        self.model.set(**changes)
        self.message.value = ""  # a refusal shown earlier no longer describes what is drawn
        self._sync()
        self.redraw()
        return self

    # Subclasses -------------------------------------------------------------------------------
    @abstractmethod
    def _apply(self, change) -> None:
        """Pass the changed control's value to ``model.set`` (raise ValueError to refuse)."""

    @abstractmethod
    def _sync_controls(self) -> None:
        """Set the controls from the model's state."""

    @abstractmethod
    def redraw(self) -> None:
        """Draw the model's current results."""
