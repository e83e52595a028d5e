"""Time limits in tests that stretch with this machine's load (its cores are shared)."""

from __future__ import annotations

from tests.browser.waiting import load_factor

__all__ = ["load_scaled"]


def load_scaled(seconds: float, cap: float = 6.0) -> int:
    """A time limit for a notebook run under this machine's load: ``seconds`` on an idle
    machine, stretched by the load factor the browser tests' waits use (run queue per core, a
    contention probe; ``tests/browser/waiting.py``), up to ``cap`` times, so an honest notebook
    never trips a limit only because other work shares the cores."""
    return round(seconds * min(cap, load_factor()))
