"""The classroom app (``apps/dashboards.ipynb`` under Voila, ``make app``) in headless Chromium:
the first tab's dashboard appears, every other tab draws its dashboard when opened, two respond
to their controls with a redrawn picture, nothing errs, and nothing is fetched from off the
machine."""

from __future__ import annotations

import re

import pytest

from . import harness as h
from .waiting import wait_until

# The app's tabs, each with one drawn title of its dashboard (plotly figure titles, as a
# learner sees them).
TABS = {
    "Chips": "by chip",
    "Numeric formats": "Data magnitudes",
    "Tiled matmul": "Engine timeline",
    "Collectives": "Ring all-reduce",
    "Scaling": "Memory per chip",
}
# Served from Voila's preheated kernel (the notebook already ran), the page draws the first
# tab in a few seconds; a request that arrives while the pool is still heating waits for the
# rest of the run, ~30-60 s on an idle 2-core machine.
RENDER_S = 90
# Opening a tab draws a dashboard the kernel has built already: well under a second idle.
TAB_S = 20


def wait_for_figure(page, watch: h.Watch, title: str, what: str, base: float) -> None:
    figure = h.figure(page, title)
    wait_until(
        lambda: figure.count() and figure.first.is_visible(),
        f"{what}: a figure titled {title!r}", base,
        seen=lambda: f"page says: {page.inner_text('body')[:600]!r}; "
        + "; ".join(watch.problems()),
    )  # fmt: skip


def open_tab(page, watch: h.Watch, tab: str):
    """Click a tab of the app, wait for its dashboard's figure; the tab's panel."""
    page.get_by_role("tab", name=tab).click()
    wait_for_figure(page, watch, TABS[tab], f"the {tab!r} tab once opened", TAB_S)
    return page.locator(".widget-tab-contents > .widget-vbox:not(.lm-mod-hidden)")


@pytest.mark.browser
def test_voila_app_shows_every_dashboard_and_they_respond(voila_server, browser, artifacts):
    page = browser.new_page()
    watch = h.Watch(allowed=(h.VOILA_TEMPLATE_CDN,))
    watch.attach(page)
    try:
        # "commit": Voila streams the page while cells run; wait for what is drawn, not for load.
        page.goto(voila_server.url(""), wait_until="commit")
        wait_for_figure(page, watch, TABS["Chips"], "the app's first tab", RENDER_S)
        for tab in TABS:
            open_tab(page, watch, tab)
        errors = h.error_outputs(page)
        assert not errors, "voila app: error output:\n" + "\n".join(errors)

        # CollectiveExplorer: the ring animation's step slider, by keyboard.
        explorer = open_tab(page, watch, "Collectives")
        ring = h.figure(explorer, "Ring all-reduce")
        title = ring.locator("text.gtitle").first.text_content()
        h.slider(explorer, "Step").focus()
        page.keyboard.press("ArrowRight")
        h.wait_for_change(
            lambda: ring.locator("text.gtitle").first.text_content(), title,
            "the ring animation's title (step k of n)", "ArrowRight on the 'Step' slider",
        )  # fmt: skip
        assert re.search(r"step 1 of", ring.locator("text.gtitle").first.text_content())

        # MatmulStepper: one step forward with its button; the engine-timeline picture follows.
        stepper = open_tab(page, watch, "Tiled matmul")
        gantt = h.figure(stepper, "Engine timeline")
        # "Step k of n ..." until the end of the run, then "End of the run: ..."
        text = stepper.locator("b").filter(has_text=re.compile(r"^(Step \d+ of|End of the run)"))
        before = text.first.inner_text()
        stepper.get_by_title("end of the run").click()
        h.wait_for_change(lambda: text.first.inner_text(), before, "the step text",
                          "clicking '>|' (end of the run)")  # fmt: skip
        assert text.first.inner_text().startswith("End of the run"), text.first.inner_text()
        cursor = gantt.locator(".shapelayer path")
        wait_until(cursor.count, "the cursor line on the engine timeline", TAB_S)

        problems = watch.problems()
        assert not problems, "voila app:\n" + "\n".join(problems)
    finally:  # a screenshot also when it fails: it shows what the page did show
        page.screenshot(path=str(artifacts / "voila-dashboards.png"), full_page=True)
        page.close()
