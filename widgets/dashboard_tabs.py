"""Several dashboards in one view, one tab each: the classroom app (``apps/dashboards.ipynb``).

Every dashboard is built (its model run) when the tabs are built, so in Voila's preheated kernel
all the computing is done before a learner asks for the page. But a tab's dashboard is put on
the page only when the tab is first opened: a browser draws the first tab's charts alone
instead of every chart of every dashboard before it paints anything (the app's 14 plotly
figures took about 2.5 s of the page's script time on the 2-core machine, ahead of the first
paint). Opening another tab draws that dashboard's charts then, a fraction of a second.

Displayed outside a live front end (an HTML export, a notebook viewer), the tabs give every
dashboard's static picture, one after the other under its tab title.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import ipywidgets as W

from trnlab._checks import choose

from ._errors import SettingError
from ._view import Dashboard

__all__ = ["DashboardTabs"]

_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


class DashboardTabs:
    """Dashboards in tabs, each drawn the first time its tab opens.

    Parameters
    ----------
    pages : sequence of (title, description, dashboard)
        One tab per entry, in order: its title (short, unique), a sentence shown above the
        dashboard, and the dashboard (a ``trnlab.widgets`` dashboard, built already).

    Examples
    --------
    >>> from trnlab.widgets import ChipExplorer, DashboardTabs, FormatExplorer
    >>> tabs = DashboardTabs([
    ...     ("Chips", "Every generation on one figure.", ChipExplorer(metric="peak.fp8")),
    ...     ("Formats", "One data set in several formats.", FormatExplorer(size=64)),
    ... ])
    >>> tabs.open("Formats")  # doctest: +SKIP
    """

    def __init__(self, pages: Sequence[tuple[str, str, Dashboard]]):
        self.pages = tuple(_checked(pages))
        self._boxes = [W.VBox([W.HTML(f"<p>{html.escape(d)}</p>")]) for _, d, _ in self.pages]
        self.widget = W.Tab(children=self._boxes, titles=[t for t, _, _ in self.pages])
        self.widget.observe(self._on_tab, names="selected_index")
        self.widget.selected_index = 0
        self._attach(0)

    @property
    def titles(self) -> tuple[str, ...]:
        return tuple(t for t, _, _ in self.pages)

    @property
    def dashboards(self) -> tuple[Dashboard, ...]:
        return tuple(d for _, _, d in self.pages)

    def attached(self) -> tuple[str, ...]:
        """Titles of the tabs whose dashboard is on the page (opened at least once)."""
        return tuple(
            t
            for (t, _, _), box in zip(self.pages, self._boxes, strict=True)
            if len(box.children) > 1
        )

    def open(self, title: str) -> Dashboard:
        """Open the tab titled ``title`` (as a click on it does) and return its dashboard."""
        index = self.titles.index(choose(title, self.titles, "tab", SettingError))
        self.widget.selected_index = index
        return self.pages[index][2]

    def _on_tab(self, change) -> None:
        if change["new"] is not None:
            self._attach(change["new"])

    def _attach(self, index: int) -> None:
        box = self._boxes[index]
        if len(box.children) == 1:
            box.children = (*box.children, self.pages[index][2].widget)

    def static_html(self) -> str:
        """Every dashboard's static picture under its tab's title."""
        parts = (
            f"<h3>{html.escape(t)}</h3><p>{html.escape(d)}</p>{dash.static_html()}"
            for t, d, dash in self.pages
        )
        return f'<div class="trnlab-static-tabs">{"".join(parts)}</div>'

    def _repr_mimebundle_(self, include=None, exclude=None, **kwargs):
        for dash in self.dashboards:  # a front end fetching state later draws them as they are
            dash._snapshot_figures()
        bundle = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = "Dashboards in tabs: " + ", ".join(self.titles)
        bundle["text/html"] = self.static_html()
        if include:
            bundle = {k: v for k, v in bundle.items() if k in include or k == _WIDGET_VIEW}
        return {k: v for k, v in bundle.items() if k not in (exclude or ())}


def _checked(pages) -> list[tuple[str, str, Dashboard]]:
    if isinstance(pages, (str, bytes)) or not isinstance(pages, Sequence) or not pages:
        raise SettingError(
            "DashboardTabs takes a non-empty list of (title, description, dashboard) entries, "
            f"one per tab; got {pages!r}"
        )
    out, seen = [], set()
    for i, entry in enumerate(pages):
        if not (isinstance(entry, tuple) and len(entry) == 3):
            raise SettingError(f"tab {i}: expected (title, description, dashboard), got {entry!r}")
        title, description, dash = entry
        if not isinstance(title, str) or not title.strip():
            raise SettingError(f"tab {i}: the title must be a non-empty string, not {title!r}")
        if not isinstance(description, str):
            raise SettingError(f"tab {title!r}: the description must be a string")
        if not isinstance(dash, Dashboard):
            raise SettingError(
                f"tab {title!r}: expected a trnlab dashboard (ChipExplorer(...), ...), "
                f"got {type(dash).__name__}"
            )
        if title.casefold() in seen:
            raise SettingError(f"two tabs are titled {title!r}; give each tab its own title")
        seen.add(title.casefold())
        out.append((title, description, dash))
    return out
