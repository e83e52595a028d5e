"""Fixtures for the real-browser tests: one JupyterLab server and one Chromium per session.

Without Chromium or Playwright the tests skip with the reason (and how to install what is
missing); in CI (``CI`` set) they fail instead, so a CI machine cannot silently skip them.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import pytest

from . import harness as h


@pytest.fixture(scope="session")
def browser_available() -> None:
    reason = h.missing()
    if reason is None:
        return
    reason = f"browser tests cannot run: {reason}"
    if h.in_ci():
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def session_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("trnlab-browser")


@pytest.fixture(scope="session")
def lab_root(session_home) -> Path:
    """A throwaway copy of labs/ (outputs cleared), plus a Notebook 7 copy of lab 03."""
    root = h.copy_labs(session_home / "labs")
    (root / "notebook7").mkdir()
    shutil.copy(root / "03_tiled_matmul.ipynb", root / "notebook7" / "03_tiled_matmul.ipynb")
    return root


@pytest.fixture(scope="session")
def lab_server(browser_available, lab_root, session_home):
    server = h.start_lab(lab_root, session_home / "jupyter")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def browser(browser_available, session_home):
    with h.chromium(session_home / "chromium-profile") as context:
        yield context


@pytest.fixture(scope="session")
def artifacts() -> Path:
    return h.artifacts_dir()


class ExecutedLabs:
    """Labs opened in JupyterLab and run top to bottom, one page each, kept for the dashboard
    tests so a lab runs once per session (a test run alone runs its lab itself)."""

    def __init__(self, server: h.Server, browser, artifacts: Path) -> None:
        self.server, self.browser, self.artifacts = server, browser, artifacts
        self.pages: dict[str, tuple[object, h.Watch, float]] = {}

    def get(self, name: str, ui: str = "lab"):
        key = f"{ui}:{name}"
        if key not in self.pages:
            page = self.browser.new_page()
            watch = h.Watch()
            watch.attach(page)
            seconds = h.open_and_run(page, self.server, name, ui)
            self.pages[key] = (page, watch, seconds)
        return self.pages[key]

    def close(self) -> None:
        for page, _, _ in self.pages.values():
            with contextlib.suppress(Exception):
                page.close()
        self.pages.clear()


@pytest.fixture(scope="session")
def executed(lab_server, browser, artifacts):
    labs = ExecutedLabs(lab_server, browser, artifacts)
    yield labs
    labs.close()


@pytest.fixture(scope="session")
def voila_server(browser_available, session_home):
    """The classroom app as ``make app`` serves it, once its preheated kernel has run the
    notebook (as when an instructor starts the app before the class arrives)."""
    server = h.start_voila(h.APP, session_home / "voila")
    try:
        h.wait_voila_pool(server)
    except BaseException:
        server.stop()
        raise
    yield server
    server.stop()
