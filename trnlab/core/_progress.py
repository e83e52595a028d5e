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

import contextlib
import contextvars
import os
import time

from trnlab._checks import whole

from ._errors import InstructionLimitError

__all__ = [
    "MAX_INSTRUCTIONS",
    "MAX_NKI_INSTRUCTIONS",
    "MAX_NUMERICS_INSTRUCTIONS",
    "Progress",
    "instruction_limit",
    "max_instructions",
]

#: A run shows its progress once it has taken this long (issue 11: "about 2 s").
AFTER_S = 2.0
#: The recording loop ticks every this many instructions (a power of two: a mask test).
EVERY = 1 << 14
#: Instructions a timing-only run records at most unless the caller raises the limit: recording
#: runs at 500-570 thousand instructions/s (benchmarks/bench_core.py, record_instructions_per_s),
#: so ~4 s of recording, ~10 s end to end with dependencies and scheduling, ~2 GB of memory.
MAX_INSTRUCTIONS = 2_000_000
#: The same for a run with numerics, whose instructions each compute their values (~8x the
#: cost per instruction measured on the reference machine): again a few seconds.
MAX_NUMERICS_INSTRUCTIONS = 250_000
_RATE = 500_000  # instructions/s recorded, timing only (the benchmark's figure, rounded down)
#: The same for a kernel traced through the NKI front end (trnlab.nki), whose Python runs per
#: instruction: the NKI tutorial's tiled matmul, ~99 thousand instructions, profiles in ~8 s
#: end to end (benchmarks/bench_nki.py), ~12 thousand instructions/s. So a timing-only NKI trace
#: stops at, and the kernel library refuses beyond, this many: ~20 s.
MAX_NKI_INSTRUCTIONS = 250_000
_NKI_RATE = 12_000


_RAISED: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "max_instructions", default=None
)


@contextlib.contextmanager
def max_instructions(n: int):
    """Raise (or lower) the instruction limit of every run inside the ``with`` block, NKI
    kernels' traces included: ``with core.max_instructions(10_000_000): nki.profile(k)(...)``."""
    token = _RAISED.set(whole(n, "max_instructions", 1, None, InstructionLimitError))
    try:
        yield
    finally:
        _RAISED.reset(token)


def instruction_limit(max_instructions, numerics: bool, nki: bool = False) -> int:
    """The instruction limit of a run: ``max_instructions`` checked, else the limit of an
    enclosing :func:`max_instructions` block, else the default for the mode (``nki``: a kernel
    traced through trnlab.nki)."""
    if max_instructions is None:
        raised = _RAISED.get()
        if raised is not None:
            return raised
        if numerics:
            return MAX_NUMERICS_INSTRUCTIONS
        return MAX_NKI_INSTRUCTIONS if nki else MAX_INSTRUCTIONS
    return whole(max_instructions, "max_instructions", 1, None, InstructionLimitError)


def limit_message(
    count: int, limit: int, numerics: bool, estimated: bool = False, nki: bool = False
) -> str:
    """Why a run stops at its instruction limit, and what to do (the estimate, the limit)."""
    mode = "run with numerics" if numerics else "timing-only run"
    if nki:
        mode = f"{mode} of an NKI kernel"
    seconds = limit / ((_NKI_RATE if nki else _RATE) / (8 if numerics else 1))
    what = f"would record about {count:,}" if estimated else f"has recorded {count:,}"
    return (
        f"this kernel {what} instructions; a {mode} records at most {limit:,} (about "
        f"{seconds:,.0f} s of recording at the reference machine's rate) and stops here rather "
        f"than run for minutes. Use a smaller shape or bigger tiles"
        + ("" if not numerics else ", run timing only (numerics=False)")
        + ", or raise the limit: max_instructions=N (or a block "
        "with trnlab.core.max_instructions(N): around an NKI kernel's run)."
    )


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

    def __init__(
        self, enabled: bool | None = None, limit: int | None = None, numerics: bool = False
    ):
        self.limit = limit  # instructions a recording may reach (None: no limit)
        self.numerics = numerics
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
        """Recording: ``instructions`` recorded so far; past the limit the run stops with an
        :class:`InstructionLimitError`."""
        if self.limit is not None and instructions >= self.limit:
            raise InstructionLimitError(limit_message(instructions, self.limit, self.numerics))
        self._show(f"recording the kernel: {instructions:,} instructions")

    def phase(self, text: str) -> None:
        """A later phase (dependencies, scheduling, metrics)."""
        self._show(text)

    def done(self, text: str) -> None:
        if self.handle is not None:
            self._show(f"done: {text}")
