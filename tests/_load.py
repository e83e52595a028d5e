"""Time limits in tests that stretch with this machine's load (its cores are shared)."""

from __future__ import annotations

import os

__all__ = ["load_scaled"]


def load_scaled(seconds: float, cap: float = 6.0) -> int:
    """A time limit for a notebook run under this machine's load: ``seconds`` on an idle
    machine, stretched by the run queue per core (up to ``cap`` times), so an honest notebook
    never trips a limit only because other work shares the cores."""
    per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    return round(seconds * min(cap, max(1.0, per_core)))
