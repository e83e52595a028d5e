"""DashboardTabs, the classroom app's view: dashboards in tabs, each put on the page the first
time its tab opens (so a browser draws one dashboard's charts before its first paint)."""

from __future__ import annotations

import ipywidgets as W
import pytest

from trnlab.widgets import ChipExplorer, DashboardTabs, FormatExplorer, SettingError

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def parts():
    return ChipExplorer(metric="peak.fp8"), FormatExplorer(size=64, chip="trn2")


@pytest.fixture
def tabs(parts):
    chips, formats = parts
    return DashboardTabs(
        [("Chips", "Every generation on one figure.", chips),
         ("Numeric formats", "One data set in several formats.", formats)]
    )  # fmt: skip


def _shown(tabs, index):
    """The widgets in tab ``index``'s panel, below its description."""
    return tabs.widget.children[index].children[1:]


def test_only_the_first_tab_is_on_the_page_until_another_opens(tabs, parts):
    chips, _ = parts
    assert tabs.widget.selected_index == 0
    assert list(tabs.widget.titles) == ["Chips", "Numeric formats"]
    assert _shown(tabs, 0) == (chips.widget,)
    assert _shown(tabs, 1) == ()
    assert tabs.attached() == ("Chips",)


def test_clicking_a_tab_puts_its_dashboard_on_the_page_once(tabs, parts):
    _, formats = parts
    tabs.widget.selected_index = 1  # what a click on the tab does in the front end
    assert _shown(tabs, 1) == (formats.widget,)
    tabs.widget.selected_index = 0
    tabs.widget.selected_index = 1
    assert _shown(tabs, 1) == (formats.widget,), "opening a tab again must not add a copy"
    assert tabs.attached() == ("Chips", "Numeric formats")


def test_open_by_title_any_case(tabs, parts):
    assert tabs.open("numeric FORMATS") is parts[1]
    assert tabs.widget.selected_index == 1


def test_an_unknown_tab_is_refused_with_the_nearest_title(tabs):
    with pytest.raises(SettingError, match=r"Did you mean 'Numeric formats'.*Chips"):
        tabs.open("numeric format")
    assert tabs.widget.selected_index == 0


def test_each_tab_says_what_its_dashboard_shows(tabs):
    first = tabs.widget.children[0].children[0]
    assert isinstance(first, W.HTML) and "Every generation on one figure." in first.value


def test_without_widgets_every_dashboard_shows_as_a_static_picture(tabs, parts):
    bundle = tabs._repr_mimebundle_()
    assert WIDGET_VIEW in bundle
    html = bundle["text/html"]
    for title, _, dash in tabs.pages:
        assert f"<h3>{title}</h3>" in html
        assert f'aria-label="{type(dash).__name__} (static picture)"' in html
    assert html.index("<h3>Chips</h3>") < html.index("<h3>Numeric formats</h3>")
    assert bundle["text/plain"] == "Dashboards in tabs: Chips, Numeric formats"


@pytest.mark.parametrize(
    "pages, says",
    [
        ([], "non-empty list"),
        ("Chips", "non-empty list"),
        ([("Chips", "x")], "expected (title, description, dashboard)"),
        ([("  ", "x", None)], "title must be a non-empty string"),
        ([("Chips", "x", "ChipExplorer")], "expected a trnlab dashboard"),
    ],
)
def test_a_malformed_tab_list_is_refused(pages, says):
    with pytest.raises(SettingError, match=None) as err:
        DashboardTabs(pages)
    assert says in str(err.value)


def test_two_tabs_with_one_title_are_refused(parts):
    chips, formats = parts
    with pytest.raises(SettingError, match="two tabs are titled 'chips'"):
        DashboardTabs([("Chips", "a", chips), ("chips", "b", formats)])
