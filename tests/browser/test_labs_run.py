"""Every lab run top to bottom in JupyterLab in headless Chromium, as a learner would.

Per lab (the labs whose dashboards ``test_widgets_drawn.py`` drives are run and checked
there, once): Run > Run All Cells, every code cell gets an execution count, no error output, no
console or page error, and every request stays on this machine (no CDN). A screenshot per lab
goes to ``test-artifacts/browser/`` (or ``$TRNLAB_ARTIFACTS``).
"""

from __future__ import annotations

import pytest

from . import harness as h

LABS = [p for p in h.labs() if p.name not in h.WIDGET_LABS]  # those run in test_widgets_drawn


@pytest.mark.browser
@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_lab_runs_clean_in_jupyterlab(lab, executed, artifacts):
    h.check_ran_clean(executed, lab, artifacts)
