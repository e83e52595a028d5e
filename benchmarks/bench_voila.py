"""First paint of the Voila classroom app (``make app``) in headless Debian Chromium.

The app shows one dashboard per tab (:class:`trnlab.widgets.DashboardTabs`). First paint: the
page requested until the first tab's dashboard (ChipExplorer: its chart drawn) is visible;
``open_tab_s``: for each other tab, from the click on it until its dashboard's chart is drawn
(``all_tabs_s``: the first paint plus every tab opened in turn). Each scenario starts its own
Voila server on a throwaway home, as ``make app`` would:

- ``preheated_warm``: the app's settings (``apps/voila.json``: a preheated kernel pool), the
  request made once the pool's kernel has run the notebook -- what a learner sees once the
  instructor has started the app;
- ``preheated_refilled``: a second learner after the first: the pool refilled, then requested;
- ``preheated_cold_request``: requested the moment the server answers, while the pool's kernel
  is still running the notebook (the page waits for the rest of that run);
- ``no_preheat``: ``--preheat_kernel=False`` (the app before preheating): every request starts a
  kernel and runs the whole notebook before the page can paint;
- ``no_preheat_cold_numba``: the same with an empty numba cache (``NUMBA_CACHE_DIR`` pointed at
  an empty folder): a fresh machine whose set-up did not warm the cache.

``server_to_pool_ready_s`` is how long after start-up the pool is ready. Figures are seconds,
one run each, on a 2-core machine shared with other work (``load_average_1min`` says how busy).
Skipped (``{"skipped": reason}``) without chromium or playwright. Uses the browser tests'
harness (``tests/browser/harness.py``).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from tests.browser.test_voila_app import TABS  # tab -> a figure title of its dashboard

FIRST = TABS["Chips"]  # ChipExplorer, the app's first tab


def _paint(h, browser, server) -> dict:
    """Request the app in a new page; seconds to the first dashboard and to all of them."""
    from tests.browser.waiting import wait_until

    page = browser.new_page()
    try:
        t0 = time.monotonic()
        page.goto(server.url(""), wait_until="commit")
        first = h.figure(page, FIRST)
        wait_until(
            lambda: first.count() and first.first.is_visible(), "the app's first dashboard", 120,
            poll=0.05,
        )  # fmt: skip
        out = {"first_dashboard_s": round(time.monotonic() - t0, 2), "open_tab_s": {}}
        for tab, title in list(TABS.items())[1:]:
            t1 = time.monotonic()
            page.get_by_role("tab", name=tab).click()
            fig = h.figure(page, title)
            wait_until(lambda f=fig: f.count() and f.first.is_visible(), f"the {tab} tab", 120,
                       poll=0.05)  # fmt: skip
            out["open_tab_s"][tab] = round(time.monotonic() - t1, 2)
        out["all_tabs_s"] = round(time.monotonic() - t0, 2)
        return out
    finally:
        page.close()


def _scenario(h, browser, home: Path, args=(), env=None, warm: bool = True, again: bool = False):
    t0 = time.monotonic()
    server = h.start_voila(h.APP, home, tuple(args), env)
    try:
        out = {}
        if warm:
            h.wait_voila_pool(server)
            out["server_to_pool_ready_s"] = round(time.monotonic() - t0, 2)
        out.update(_paint(h, browser, server))
        if again:
            h.wait_voila_pool(server)
            out["refilled"] = _paint(h, browser, server)
        return out
    finally:
        server.stop()


def run() -> dict:
    from tests.browser import harness as h

    if reason := h.missing():
        return {"skipped": reason}
    out: dict = {"load_average_1min_at_start": round(os.getloadavg()[0], 2)}
    no_preheat = ["--preheat_kernel=False"]
    with tempfile.TemporaryDirectory(prefix="trnlab-bench-voila-") as tmp:
        tmp = Path(tmp)
        with h.chromium(tmp / "profile") as browser:
            warm = _scenario(h, browser, tmp / "warm", again=True)
            out["preheated_refilled"] = warm.pop("refilled")
            out["preheated_warm"] = warm
            out["preheated_cold_request"] = _scenario(h, browser, tmp / "cold", warm=False)
            out["no_preheat"] = _scenario(h, browser, tmp / "np", no_preheat, warm=False)
            (tmp / "numba").mkdir()
            out["no_preheat_cold_numba"] = _scenario(
                h, browser, tmp / "np-cold", no_preheat, {"NUMBA_CACHE_DIR": str(tmp / "numba")},
                warm=False,
            )  # fmt: skip
    out["load_average_1min_at_end"] = round(os.getloadavg()[0], 2)
    out["note"] = "one run each; headless chromium; 2-core machine shared with other work"
    return out
