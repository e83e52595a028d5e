"""The classroom app (``apps/dashboards.ipynb`` under Voila, ``make app``) in headless Chromium:
every dashboard appears, two respond to their controls with a redrawn picture, nothing errs,
and nothing is fetched from off the machine."""

from __future__ import annotations

import re

import pytest

from . import harness as h
from .waiting import wait_until

# One drawn title per dashboard in the app (plotly figure titles, as a learner sees them).
TITLES = ("by chip", "Data magnitudes", "Engine timeline", "Ring all-reduce", "Memory per chip")
# Served from Voila's preheated kernel (the notebook already ran), the page draws every
# dashboard in a few seconds; a request that arrives while the pool is still heating waits for
# the rest of the run, ~30-60 s on an idle 2-core machine.
RENDER_S = 90


def wait_for_dashboards(page, watch: h.Watch, base: float = RENDER_S) -> None:
    missing = list(TITLES)

    def all_drawn() -> bool:
        nonlocal missing
        missing = [t for t in TITLES if not h.figure(page, t).count()]
        return not missing

    wait_until(
        all_drawn, f"the voila app to draw a figure titled with each of {TITLES}", base,
        seen=lambda: f"missing {missing}; page says: {page.inner_text('body')[:600]!r}; "
        + "; ".join(watch.problems()),
    )  # fmt: skip


@pytest.mark.browser
def test_voila_app_shows_every_dashboard_and_they_respond(voila_server, browser, artifacts):
    page = browser.new_page()
    watch = h.Watch(allowed=(h.VOILA_TEMPLATE_CDN,))
    watch.attach(page)
    try:
        # "commit": Voila streams the page while cells run; wait for what is drawn, not for load.
        page.goto(voila_server.url(""), wait_until="commit")
        wait_for_dashboards(page, watch)
        errors = h.error_outputs(page)
        assert not errors, "voila app: error output:\n" + "\n".join(errors)

        # CollectiveExplorer: the ring animation's step slider, by keyboard.
        ring = h.figure(page, "Ring all-reduce")
        explorer = h.dashboard(page, page.locator("text.gtitle", has_text="Ring all-reduce"))
        explorer.scroll_into_view_if_needed()
        title = ring.locator("text.gtitle").first.text_content()
        h.slider(explorer, "Step").focus()
        page.keyboard.press("ArrowRight")
        h.wait_for_change(
            lambda: ring.locator("text.gtitle").first.text_content(), title,
            "the ring animation's title (step k of n)", "ArrowRight on the 'Step' slider",
        )  # fmt: skip
        assert re.search(r"step 1 of", ring.locator("text.gtitle").first.text_content())

        # MatmulStepper: one step forward with its button; the engine-timeline picture follows.
        stepper = h.dashboard(page, page.get_by_label("tile N", exact=True))
        stepper.scroll_into_view_if_needed()
        gantt = h.figure(stepper, "Engine timeline")
        # "Step k of n ..." until the end of the run, then "End of the run: ..."
        text = stepper.locator("b").filter(has_text=re.compile(r"^(Step \d+ of|End of the run)"))
        before = text.first.inner_text()
        stepper.get_by_title("end of the run").click()
        h.wait_for_change(lambda: text.first.inner_text(), before, "the step text",
                          "clicking '>|' (end of the run)")  # fmt: skip
        assert text.first.inner_text().startswith("End of the run"), text.first.inner_text()
        assert gantt.locator(".shapelayer path").count(), "the cursor line is not drawn"

        problems = watch.problems()
        assert not problems, "voila app:\n" + "\n".join(problems)
    finally:  # a screenshot also when it fails: it shows what the page did show
        page.screenshot(path=str(artifacts / "voila-dashboards.png"), full_page=True)
        page.close()
