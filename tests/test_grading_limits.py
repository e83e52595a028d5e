"""Limits on a graded notebook: over its time limit it is stopped (all its processes) and
graded on what it checked before; without a sandbox (``--unsafe-no-sandbox``) it still ends
with every process it started.

(Apart from the hostile batch in ``test_grading_hostile.py`` so that the two long grading
runs can go to different workers.)
"""

from __future__ import annotations

import uuid

import nbformat
import pytest

from tests.grading_helpers import (
    KEYS,
    RIGHT,
    alive,
    daemon_cell,
    load_scaled,
    sandbox_or_skip,
    submission,
)
from trnlab.course import grading

pytestmark = pytest.mark.notebook


def test_without_a_sandbox_a_notebook_still_ends_with_its_processes(tmp_path):
    """--unsafe-no-sandbox gives no isolation, but grades the same, and a detached process of
    the notebook (re-parented to the runner) is still ended with it."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    name = f"trnlab{uuid.uuid4().hex[:8]}"
    daemon_answers = {**RIGHT, "trust": "f'daemon {daemon_pid} was running'"}
    submission(folder / "pat.ipynb", "pat", daemon_answers, extra=daemon_cell([], name))
    rows = grading.grade(
        folder,
        tmp_path / "g.csv",
        timeout=load_scaled(120),
        lab="01",
        unsafe_no_sandbox=True,
        log=None,
    )
    assert [(r["exercise"], r["status"]) for r in rows] == [
        *[(k, "passed") for k in KEYS[:-1]],
        ("lab01.trust", "failed"),
    ]
    assert "was running" in rows[-1]["message"]
    assert alive(name) == []


def test_a_notebook_over_its_time_limit_is_stopped_and_graded_on_what_it_checked(tmp_path):
    """Every cell within --timeout, the whole over --notebook-timeout: the run is stopped
    (all its processes), and the answers checked before then still count."""
    sandbox_or_skip()
    folder = tmp_path / "submissions"
    folder.mkdir()
    slow = "import time\nfor _ in range(25):\n    time.sleep(1)"
    path = submission(folder / "sam.ipynb", "sam", RIGHT, extra=slow, after="lab01.clock.check(")
    nb = nbformat.read(path, as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if "lab01.clock.check(" in c.source)
    limit = load_scaled(30)  # time enough for the answers up to the clock, under any load
    for _ in range(limit // 25 + 1):  # 25 s cells after the first answer: past the limit
        nb.cells.insert(at + 1, nbformat.v4.new_code_cell(slow))
    nbformat.write(nb, path)
    rows = grading.grade(
        folder, tmp_path / "g.csv", timeout=limit, notebook_timeout=limit, lab="01", log=None
    )
    assert [(r["exercise"], r["status"]) for r in rows] == [
        *[(k, "passed") for k in KEYS[: KEYS.index("lab01.clock") + 1]],
        *[(k, "not attempted") for k in KEYS[KEYS.index("lab01.clock") + 1 :]],
        ("", "error"),
    ]
    stopped = limit - max(5.0, 0.05 * limit)  # the runner stops it just inside the limit
    assert rows[-1]["message"].startswith(
        f"the notebook was stopped after {stopped:.0f} s, its time limit"
    )
