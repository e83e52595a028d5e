"""Every lab run top to bottom in JupyterLab in headless Chromium, as a learner would.

Per lab: Run > Run All Cells, every code cell gets an execution count, no error output, no
console or page error, and every request stays on this machine (no CDN). A screenshot per lab
goes to ``test-artifacts/browser/`` (or ``$TRNLAB_ARTIFACTS``).
"""

from __future__ import annotations

import pytest

from . import harness as h

LABS = h.labs()


@pytest.mark.browser
@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_lab_runs_clean_in_jupyterlab(lab, executed, artifacts):
    page, watch, seconds = executed.get(lab.name)
    plots = page.locator(".js-plotly-plot")
    if plots.count():  # the screenshot shows the first chart, not only the last cell
        plots.first.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / f"jupyterlab-{lab.stem}.png"))
    errors = h.error_outputs(page)
    assert not errors, f"{lab.name}: error output on the page after Run All:\n" + "\n".join(errors)
    problems = watch.problems()
    assert not problems, f"{lab.name} (ran in {seconds:.0f} s): " + "\n".join(problems)
