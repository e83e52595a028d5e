"""A progress line for long runs, shown only in a notebook and only once a run passes ~2 s.

The model layer never imports ipywidgets; in IPython it updates one HTML line in place
(``IPython.display`` with a display id), elsewhere it stays silent. The recording loop calls
:meth:`Progress.tick` every few thousand instructions (the check costs one bitwise test per
instruction), so a short run never shows anything.

Whether the line appears depends on how fast the machine is, so it is an output no executed
notebook may keep: ``TRNLAB_PROGRESS=0`` in the kernel's environment turns it off. The test
suite (nbval compares a checked cell's outputs, and a busy machine would add the line to them)
and ``scripts/run_labs.py`` (the committed labs) set it.
"""

from __future__ import annotations

import os
import time

__all__ = ["Progress"]

#: A run shows its progress once it has taken this long (issue 11: "about 2 s").
AFTER_S = 2.0
#: The recording loop ticks every this many instructions (a power of two: a mask test).
EVERY = 1 << 14


def _wanted() -> bool:
    """In a notebook kernel, and not turned off with ``TRNLAB_PROGRESS=0``."""
    return os.environ.get("TRNLAB_PROGRESS", "1").strip() != "0" and _in_notebook()


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
        self.enabled = _wanted() if enabled is None else bool(enabled)
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
