"""First-dashboard render time in a real browser (headless Debian Chromium via Playwright).

Figures (seconds, one run each: a cold server and browser are part of what a learner waits for):

- ``jupyterlab_server_start_s``: JupyterLab answering on loopback;
- ``lab03_open_to_kernel_idle_s``: lab 03 opened until its trnlab kernel is idle;
- ``lab03_run_to_first_figure_s``: Run > Run All Cells until the MatmulStepper's first chart
  (the engine timeline) is drawn in the page;
- ``lab03_run_all_s``: Run All Cells until every cell has finished.

The Voila classroom app's first paint is ``bench_voila``.

Skipped (``{"skipped": reason}``) without chromium or playwright. Uses the browser tests'
harness (``tests/browser/harness.py``); runs on a throwaway copy of labs/.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path


def run() -> dict:
    from tests.browser import harness as h
    from tests.browser.waiting import wait_until

    if reason := h.missing():
        return {"skipped": reason}
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="trnlab-bench-browser-") as tmp:
        tmp = Path(tmp)
        root = h.copy_labs(tmp / "labs")
        t0 = time.monotonic()
        server = h.start_lab(root, tmp / "jupyter")
        out["jupyterlab_server_start_s"] = round(time.monotonic() - t0, 2)
        try:
            with h.chromium(tmp / "profile") as browser:
                page = browser.new_page()
                name = "03_tiled_matmul.ipynb"
                t0 = time.monotonic()
                h.open_notebook(page, server, name)
                out["lab03_open_to_kernel_idle_s"] = round(time.monotonic() - t0, 2)
                timeline = h.figure(page, "Engine timeline")
                t0 = time.monotonic()
                h.run_all_cells(page, name)
                wait_until(lambda: timeline.count() > 0, "lab 03's engine timeline", 120, poll=0.05)
                out["lab03_run_to_first_figure_s"] = round(time.monotonic() - t0, 2)
                h.wait_until_run(page, server, name)
                out["lab03_run_all_s"] = round(time.monotonic() - t0, 2)
                page.close()
        finally:
            server.stop()
    out["note"] = "one cold run each; headless chromium; 2-core machine shared with other work"
    return out
