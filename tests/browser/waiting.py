"""Load-aware waiting for the browser tests and benchmarks: wait on a condition, never a clock.

A wait is given a *budget*: how long the awaited thing may take on an idle machine (with a
margin). The budget is spent on a clock that runs slower when the machine is busy: every poll
charges ``wall seconds / load factor``, where the load factor says how many runnable tasks
share each core right now. So a wait that would take 20 s idle may take 60 s while a test
suite, a compile and another engineer's job share two cores, and it still passes; a wait for
something that never happens still ends, at ``CEILING`` times its budget at most.

The load factor is the larger of

- the 1-minute load average per available core (``os.getloadavg``), read at every poll;
- a contention probe taken once per process: a 0.25 s busy loop's wall time over its own
  thread's CPU time (1.0 on an idle core; 2.0 when the core is shared with one other busy
  process), which sees load the 1-minute average has not caught up with yet;
- ``TRNLAB_WAIT_SCALE`` from the environment, if set (e.g. 3 on a known-slow CI machine).

Every failure says what was awaited, for how long, at what load, and what was seen last.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: A wait ends at the latest after CEILING x its budget of wall time, however busy the machine.
CEILING = 8.0
#: Seconds between two looks at the awaited condition.
POLL_S = 0.25


def cores() -> int:
    """Cores this process may run on (the affinity mask, not the machine's total)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@functools.lru_cache(maxsize=1)
def contention() -> float:
    """Wall time over this thread's CPU time for a short busy loop (>= 1.0), measured once."""
    wall0, cpu0 = time.perf_counter(), time.thread_time()
    while time.perf_counter() - wall0 < 0.25:
        pass
    wall, cpu = time.perf_counter() - wall0, time.thread_time() - cpu0
    return max(1.0, wall / max(cpu, 1e-3))


def _env_scale() -> float:
    raw = os.environ.get("TRNLAB_WAIT_SCALE", "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"TRNLAB_WAIT_SCALE must be a number >= 1, got {raw!r}") from None
    if not value >= 1.0:
        raise ValueError(f"TRNLAB_WAIT_SCALE must be a number >= 1, got {raw!r}")
    return value


def load_factor() -> float:
    """How many times slower than on an idle machine things run now (>= 1.0)."""
    try:
        per_core = os.getloadavg()[0] / cores()
    except OSError:  # no load average on this platform
        per_core = 1.0
    return max(1.0, per_core, contention(), _env_scale())


def budget_s(base: float) -> float:
    """``base`` seconds scaled by the load factor now, capped at ``CEILING x base``: for calls
    that take one timeout up front (Playwright's own waits, a server's start-up)."""
    return base * min(load_factor(), CEILING)


def budget_ms(base: float) -> float:
    """:func:`budget_s` in milliseconds, as Playwright takes its timeouts."""
    return 1000.0 * budget_s(base)


class WaitTimeout(AssertionError):
    """A condition did not come true within its load-scaled budget."""


def wait_until(
    condition: Callable[[], T],
    what: str,
    base: float,
    seen: Callable[[], object] | None = None,
    poll: float = POLL_S,
) -> T:
    """Poll ``condition()`` until it returns something truthy; return that value.

    Parameters
    ----------
    condition
        Looks once and returns a truthy value when the awaited thing has happened. An exception
        it raises ends the wait at once (e.g. an error output appeared: no use waiting on).
    what
        What is awaited, as the failure message should say it ("every code cell of lab 03 to
        show an execution count").
    base
        Seconds it may take on an idle machine, with a margin. Spent on the load-scaled clock
        described in the module docstring; the wall-time ceiling is ``CEILING * base``.
    seen
        Returns what the page or server shows instead, for the failure message.
    poll
        Seconds between looks.

    Raises
    ------
    WaitTimeout
        With what was awaited, the wall time waited, the budget, the load factors seen and
        what ``seen()`` reports.
    """
    start = last = time.monotonic()
    spent, peak = 0.0, 1.0
    while True:
        value = condition()
        if value:
            return value
        now = time.monotonic()
        factor = load_factor()
        peak = max(peak, factor)
        spent += (now - last) / factor
        last = now
        if spent >= base or now - start >= CEILING * base:
            break
        time.sleep(poll)
    detail = ""
    if seen is not None:
        try:
            detail = f"; saw: {seen()}"
        except Exception as err:  # the page may be gone: say so rather than hide the timeout
            detail = f"; could not read what the page shows ({type(err).__name__}: {err})"
    raise WaitTimeout(
        f"waited {time.monotonic() - start:.0f} s for {what} (budget {base:.0f} s on an idle "
        f"machine; load factor up to x{peak:.1f} on {cores()} cores, ceiling "
        f"{CEILING * base:.0f} s){detail}"
    )
