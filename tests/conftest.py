"""How the suite runs in parallel (``make test``: pytest-xdist, ``--dist loadfile``).

- **A file is one unit, on one worker.** nbval runs a notebook's cells one after another in
  one kernel, each cell a test item: dealt out item by item (``--dist load``), cells of one
  notebook ran on both workers, each in its own kernel, and a later cell failed on a name an
  earlier cell (run elsewhere) defined. The same holds for a browser test module, whose tests
  share the labs it has run in its JupyterLab and Chromium (``tests/browser/conftest.py``).
  ``--dist loadgroup`` with an ``xdist_group`` per notebook would be finer, but pytest-xdist 3.8
  marks a group by rewriting ``item._nodeid``, which pytest 9.2 no longer reads: the groups
  were silently ignored (97 nbval cells failed so in one run). ``loadfile`` needs no marks.
- **Longest first.** Files are handed out in the order of their first item below (browser
  tests, then the lab runs, then nbval, then the rest; ``--no-loadscope-reorder`` keeps it), so
  the last unit to start is a short one and both workers finish close together.
- **nbval's fixed 5 s wait** for a cell's output messages, after the kernel has replied, is
  stretched with the machine's load (``tests/browser/waiting.py``), as every other wait here.
- **No output that depends on the machine's speed.** trnlab.core shows a progress line in a
  notebook once a run passes ~2 s; on a busy machine it appeared in cells nbval checks, which
  then failed ("Unexpected output fields"). Every kernel the suite starts inherits
  ``TRNLAB_PROGRESS=0`` (the line is unit-tested in ``test_core_timing.py``).
- **Property tests draw the same examples on every run.** With hypothesis' random draws, a
  fuzz test once passed every local run and failed on CI (the answer string ``'E0'``): a real
  bug, but found by luck, on the run that had to be green. The suite loads the ``repeatable``
  profile (examples derived from each test's name, no example database); a hunt for new cases
  is ``TRNLAB_FUZZ_RANDOM=1 make test`` (profile ``explore``: fresh random examples, failures
  remembered in ``.hypothesis/``). A case found so becomes an ``@example`` on its test.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from tests.browser.waiting import budget_s

os.environ["TRNLAB_PROGRESS"] = "0"  # before any kernel starts: they inherit it

settings.register_profile("repeatable", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False)
# Loaded before any test module is imported, so every @settings(...) inherits it.
settings.load_profile("explore" if os.environ.get("TRNLAB_FUZZ_RANDOM") == "1" else "repeatable")


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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_rank)  # stable: each file keeps its own order


NBVAL_OUTPUT_S = 5  # nbval's own fixed wait (IPyNbCell.output_timeout)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if _is_nbval(item):  # scaled with the load when the cell starts, not at collection
        item.output_timeout = budget_s(NBVAL_OUTPUT_S)
