"""First-dashboard render time in a real browser (headless Debian Chromium via Playwright).

Figures (seconds, one run each: a cold server and browser are part of what a learner waits for):

- ``jupyterlab_server_start_s``: JupyterLab answering on loopback;
- ``lab03_open_to_kernel_idle_s``: lab 03 opened until its trnlab kernel is idle;
- ``lab03_run_to_first_figure_s``: Run > Run All Cells until the MatmulStepper's first chart
  (the engine timeline) is drawn in the page;
- ``lab03_run_all_s``: Run All Cells until every cell has finished;
- ``slow_page``: lab 03 run ``SLOW_RUNS`` times on a page whose CPU Chromium throttles
  ``SLOW_FACTOR`` x (a slow laptop, or a loaded CI machine): each run's Run All time and how
  many of its charts were left empty (untitled) ``SETTLE_S`` after the run; an empty chart is a
  figure model that lost its layout and data (``widgets/_plotly_esm.py``), and should be 0.

The Voila classroom app's first paint is ``bench_voila``.

Skipped (``{"skipped": reason}``) without chromium or playwright. Uses the browser tests'
harness (``tests/browser/harness.py``); runs on a throwaway copy of labs/.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

SLOW_FACTOR, SLOW_RUNS, SETTLE_S = 8, 3, 20


def _slow_page(h, server, browser, root: Path) -> dict:
    """lab 03 on a throttled page, ``SLOW_RUNS`` times (a fresh copy of the notebook each)."""
    runs = []
    for i in range(SLOW_RUNS):
        name = f"03_slow_{i}.ipynb"
        (root / name).write_bytes((root / "03_tiled_matmul.ipynb").read_bytes())
        page = browser.new_page()
        browser.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": SLOW_FACTOR})
        seconds = h.open_and_run(page, server, name)
        time.sleep(SETTLE_S)  # charts still drawing after the last cell are given their time
        titles = h.chart_titles(page)
        runs.append({"run_all_s": round(seconds, 1), "charts": len(titles),
                     "empty_charts": sum(1 for t in titles if not t)})  # fmt: skip
        page.close()
    return {"cpu_throttle": SLOW_FACTOR, "runs": runs}


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
                out["slow_page"] = _slow_page(h, server, browser, root)
        finally:
            server.stop()
    out["note"] = "one cold run each; headless chromium; 2-core machine shared with other work"
    return out
