"""Observing a kernel's NKI calls, and the table of calls a replay may make.

Every public ``nki.language`` / ``nki.isa`` function that makes a tensor or an instruction is
wrapped once, at import, by :func:`observed`. The wrapper costs one attribute test per call
unless the running trace has an *observer* (``Trace.observer``), which then sees the kernel's
own calls (not the calls the API makes inside itself) with their arguments, the kernel line
that made them, and what they returned or raised. The grader's recorder
(:mod:`trnlab.course.answers`) is such an observer: it writes a learner's kernel down as its
NKI calls, and a clean process replays them through :data:`API` with each call's recorded
allocation site and source line (``Trace.forced``), so the replay allocates rotating buffers
and names lines exactly as the learner's run did.

The two private operations the tensor operators lower to are observed too:
``language._assign`` (``t[...] = value``) and ``language._update`` (``t += value``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

from . import _numerics as N
from ._trace import _STACK, user_frame

__all__ = ["API", "observed", "wrap_module"]

#: Qualified name (``"nl.load"``, ``"nisa.nc_matmul"``) -> the function a replay may call.
API: dict[str, Callable] = {}


def observed(qual: str, fn: Callable) -> Callable:
    """``fn`` wrapped so a trace's observer sees the kernel's calls of it (see the module)."""

    @functools.wraps(fn)
    def api(*args, **kwargs):
        tr = _STACK[-1] if _STACK else None
        if tr is None or tr.observer is None or tr.observing:
            return fn(*args, **kwargs)
        obs = tr.observer
        token = obs.before(qual, args, kwargs, user_frame(2))
        tr.observing = True
        try:
            out = fn(*args, **kwargs)
        except BaseException as exc:
            tr.observing = False
            obs.raised(token, exc)
            raise
        tr.observing = False
        obs.after(token, out)
        return out

    api.__wrapped__ = fn
    name = N._NAMES.get(id(fn))
    if name is not None:  # an operator passed as op=nl.add must still name "add"
        N.register(api, name)
    API[qual] = api
    return api


def wrap_module(namespace: dict, prefix: str, names: Iterable[str]) -> None:
    """Replace each function ``names`` of a module's ``namespace`` by its observed wrapper."""
    for name in names:
        fn = namespace.get(name)
        if callable(fn) and not isinstance(fn, type):
            namespace[name] = observed(f"{prefix}.{name}", fn)
