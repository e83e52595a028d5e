"""Speed figures for trnlab, printed as JSON (run ``python -m benchmarks``).

Each ``benchmarks/bench_*.py`` module defines ``run() -> dict`` returning named figures
(seconds, rates, ratios against a reference measured in the same process). Nothing here asserts
a time: the figures are reported, and targets are checked by reading them.
"""

import time as _time
from collections.abc import Callable
from typing import Any


def best_of(fn: Callable[[], Any], repeats: int = 1) -> tuple[float, Any]:
    """The fastest of ``repeats`` calls of ``fn`` in seconds, and the last call's result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = _time.perf_counter()
        out = fn()
        best = min(best, _time.perf_counter() - t0)
    return best, out
