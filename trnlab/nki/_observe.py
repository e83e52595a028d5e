"""Observing a kernel's NKI calls, and the table of calls a replay may make.

Every public ``nki.language`` / ``nki.isa`` function that makes a tensor or an instruction is
wrapped once, at import, by :func:`observed`. The wrapper marks the trace while the call runs
(``Trace.in_api``), so only the kernel's own calls are seen, not the calls an API makes inside
itself; an ``nki.isa`` call of the kernel that returns nothing returns its instruction handle
(NKI 0.6's ``NkiInstruction``). If the running trace has an *observer* (``Trace.observer``), it
sees those calls with their arguments, the kernel line that made them, and what they returned
or raised. The grader's recorder
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
from ._instruction import NkiInstruction
from ._trace import _STACK, user_frame

__all__ = ["API", "observed", "wrap_module"]

#: Qualified name (``"nl.load"``, ``"nisa.nc_matmul"``) -> the function a replay may call.
API: dict[str, Callable] = {}


def observed(qual: str, fn: Callable) -> Callable:
    """``fn`` wrapped so a trace's observer sees the kernel's calls of it (see the module).

    An ``nki.isa`` instruction the kernel calls itself (not one an API makes inside) that
    returns nothing returns its :class:`~trnlab.nki._instruction.NkiInstruction` handle, as in
    NKI 0.6."""
    handle = qual.startswith("nisa.")

    @functools.wraps(fn)
    def api(*args, **kwargs):
        tr = _STACK[-1] if _STACK else None
        if tr is None or tr.in_api:  # outside a kernel, or a call an API makes inside
            return fn(*args, **kwargs)
        first = len(tr.ops)
        obs = tr.observer
        token = None if obs is None else obs.before(qual, args, kwargs, user_frame(2))
        tr.in_api = True
        try:
            out = fn(*args, **kwargs)
        except BaseException as exc:
            tr.in_api = False
            if obs is not None:
                obs.raised(token, exc)
            raise
        tr.in_api = False
        if out is None and handle:
            out = NkiInstruction(tr, first, len(tr.ops), qual)
        if obs is not None:
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
