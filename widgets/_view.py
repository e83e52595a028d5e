"""What every dashboard view shares: controls bound to a model, errors shown as messages.

A view subclasses :class:`Dashboard`, builds its controls and figures, then calls
:meth:`Dashboard._bind`. A control change calls :meth:`_apply` (which only calls
``model.set``); if the model refuses, the message shows why and the last good view stays.
"""

from __future__ import annotations

import html
from abc import ABC, abstractmethod

import ipywidgets as W

__all__ = ["Dashboard"]


class Dashboard(ABC):
    """Base of the dashboards: ``model`` + ``widget`` + ``redraw()``."""

    model: object
    widget: W.Widget

    def __init__(self) -> None:
        self.message = W.HTML()
        self._syncing = False

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

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
        self.redraw()

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
