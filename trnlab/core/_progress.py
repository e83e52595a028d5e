"""A progress line for long runs, shown only in a notebook and only once a run passes ~2 s.

The model layer never imports ipywidgets; in IPython it updates one HTML line in place
(``IPython.display`` with a display id), elsewhere it stays silent. The recording loop calls
:meth:`Progress.tick` every few thousand instructions (the check costs one bitwise test per
instruction), so a short run never shows anything.
"""

from __future__ import annotations

import time

__all__ = ["Progress"]

#: A run shows its progress once it has taken this long (issue 11: "about 2 s").
AFTER_S = 2.0
#: The recording loop ticks every this many instructions (a power of two: a mask test).
EVERY = 1 << 14


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with Jupyter
        return False
    ip = get_ipython()
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


class Progress:
    """Phases of a run (recording, dependencies, scheduling) on one updating line."""

    def __init__(self, enabled: bool | None = None):
        self.t0 = time.perf_counter()
        self.enabled = _in_notebook() if enabled is None else bool(enabled)
        self.handle = None
        self.lines: list[str] = []

    def _show(self, text: str) -> None:
        if not self.enabled or time.perf_counter() - self.t0 < AFTER_S:
            return
        from IPython.display import HTML, display

        html = HTML(
            f"<div style='font-family: monospace; font-size: 90%'>trnlab.core: {text} "
            f"({time.perf_counter() - self.t0:,.1f} s)</div>"
        )
        if self.handle is None:
            self.handle = display(html, display_id=True)
        else:
            self.handle.update(html)

    def tick(self, instructions: int) -> None:
        """Recording: ``instructions`` recorded so far."""
        self._show(f"recording the kernel: {instructions:,} instructions")

    def phase(self, text: str) -> None:
        """A later phase (dependencies, scheduling, metrics)."""
        self._show(text)

    def done(self, text: str) -> None:
        if self.handle is not None:
            self._show(f"done: {text}")
