"""How the suite runs in parallel (``make test``: pytest-xdist, ``--dist loadgroup``).

- **A notebook under nbval is one unit.** nbval runs a notebook's cells one after another in one
  kernel, each cell a test item. Plain ``--dist load`` hands items to whichever worker is free,
  so cells of one notebook ran on both workers, each starting its own kernel and running only
  some cells: a later cell then failed on a name an earlier cell (run elsewhere) defined, or
  passed, depending on how the items happened to be dealt. Each notebook's cells are one
  ``xdist_group``, so one worker runs all of them in order.
- **A notebook's browser tests are one unit** (``harness.same_page``): the tests that read a
  lab's page after Run All go to the worker that ran it there. Each worker that gets browser
  tests starts its own JupyterLab and Chromium (``tests/browser/conftest.py``), so the labs'
  browser runs spread over both workers.
- **Longest first.** Units are handed out in the order below (the browser group, then the lab
  runs, then nbval, then the rest; ``--no-loadscope-reorder`` keeps it), so the last unit to
  start is a short one and both workers finish close together.
- **nbval's fixed 5 s wait** for a cell's output messages, after the kernel has replied, is
  stretched with the machine's load (``tests/browser/waiting.py``), as every other wait here.
- **No output that depends on the machine's speed.** trnlab.core shows a progress line in a
  notebook once a run passes ~2 s; on a busy machine it appeared in cells nbval checks, which
  then failed ("Unexpected output fields"). Every kernel the suite starts inherits
  ``TRNLAB_PROGRESS=0`` (the line is unit-tested in ``test_core_timing.py``).
"""

from __future__ import annotations

import os

import pytest

from tests.browser.waiting import budget_s

os.environ["TRNLAB_PROGRESS"] = "0"  # before any kernel starts: they inherit it


def _rank(item: pytest.Item) -> int:
    """Where an item's unit goes in the queue: lower starts earlier."""
    if item.get_closest_marker("browser"):
        return 0
    if item.get_closest_marker("notebook"):
        return 1  # a whole lab through papermill: the longest single items
    if _is_nbval(item):
        return 2
    return 3


def _is_nbval(item: pytest.Item) -> bool:
    return type(item).__name__ == "IPyNbCell" and type(item).__module__.startswith("nbval")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _is_nbval(item):
            item.add_marker(pytest.mark.xdist_group(f"nbval:{item.parent.nodeid}"))
    items.sort(key=_rank)  # stable: each unit keeps its own order


def pytest_configure(config: pytest.Config) -> None:
    # Registered here too, so a run without pytest-xdist (``-p no:xdist``) does not warn.
    config.addinivalue_line("markers", "xdist_group(name): run with the group's other tests")


NBVAL_OUTPUT_S = 5  # nbval's own fixed wait (IPyNbCell.output_timeout)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if _is_nbval(item):  # scaled with the load when the cell starts, not at collection
        item.output_timeout = budget_s(NBVAL_OUTPUT_S)
