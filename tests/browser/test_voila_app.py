"""The classroom app (``apps/dashboards.ipynb`` under Voila, ``make app``) in headless Chromium:
every dashboard appears, two respond to their controls with a redrawn picture, nothing errs,
and nothing is fetched from off the machine."""

from __future__ import annotations

import re
import time

import pytest

from . import harness as h

# One drawn title per dashboard in the app (plotly figure titles, as a learner sees them).
TITLES = ("by chip", "Data magnitudes", "Engine timeline", "Ring all-reduce", "Memory per chip")
RENDER_S = 180  # voila runs the whole notebook before it shows the last dashboard


def wait_for_dashboards(page, timeout: float = RENDER_S) -> None:
    deadline = time.monotonic() + timeout
    missing = list(TITLES)
    while time.monotonic() < deadline:
        missing = [t for t in TITLES if not h.figure(page, t).count()]
        if not missing:
            return
        time.sleep(0.5)
    raise AssertionError(
        f"voila app: expected a drawn figure titled with each of {TITLES} within "
        f"{timeout:.0f} s; missing {missing}; page says: {page.inner_text('body')[:600]!r}"
    )


@pytest.mark.browser
def test_voila_app_shows_every_dashboard_and_they_respond(voila_server, browser, artifacts):
    page = browser.new_page()
    watch = h.Watch(allowed=(h.VOILA_TEMPLATE_CDN,))
    watch.attach(page)
    try:
        page.goto(voila_server.url(""), wait_until="domcontentloaded")
        try:
            wait_for_dashboards(page)
        except AssertionError as err:
            raise AssertionError(f"{err}\n" + "\n".join(watch.problems())) from None
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
