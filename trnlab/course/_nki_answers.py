"""An NKI kernel as an answer: recorded as its ``nki.language`` / ``nki.isa`` calls, replayed
through ``trnlab.nki`` in the clean checker.

An NKI kernel's values are computed by trnlab.nki itself, so the grader records the kernel one
level up from the engine: every call it made to the NKI API (:mod:`trnlab.nki._observe`), with
its tensor operands as *handles* (the storage a view belongs to, numbered in the order the
kernel met it) and the view itself (shape, strides, offset), its other arguments as plain
data, the tensors it returned (new storages get the next handles), whether it raised, and the
kernel line that made it (the allocation site and source line the NKI compiler's buffer
rotation and the profile's messages depend on). One trace per set of arguments the check
gave the kernel (chip, numerics, the HBM tensors' names, shapes and dtypes, other arguments).

The checker replays a trace: the same calls, in order, on a fresh trace, each under its
recorded site and line (``Trace.forced``), so trnlab.nki checks every rule again, computes
every value again, and plans the same rotating buffers; the profile is the same as the
learner's. A replay can only do what a straight-line NKI kernel could: a call outside the API,
a handle to a tensor never made, a view outside its tensor, arguments the function does not
take, or a call that raises when replayed but did not when recorded is refused with a
:class:`~trnlab.course.answers.GraderReplayError` that says so.

Call entries: ``[qualified API name, args, kwargs, returned, raised, site]`` with ``site`` =
``[code, line, outer code, outer line, label, function, file]`` (code objects as numbers). The
instruction handles ``nki.isa`` calls return are numbered in the order they came back
(``{"$": "i", "n": k}``), so a recorded ``depends_on`` replays between the same instructions.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from enum import Enum
from typing import Any

import numpy as np

from . import answers as A

__all__ = ["active", "key", "record", "replay"]

#: The ``nki.isa`` enumerations an argument may name.
_ENUMS = ("engine", "reduce_cmd", "dge_mode", "oob_mode", "matmul_perf_mode", "nc_version",
          "dma_engine")  # fmt: skip


def active() -> bool:
    """Whether an NKI kernel is being traced in this thread (a recorder or replay is then
    called by trnlab.nki, with HBM tensors, not with a kernel context)."""
    mod = sys.modules.get("trnlab.nki._trace")
    return bool(mod is not None and mod._STACK)


def _nki():
    import trnlab.nki._numerics as N
    import trnlab.nki._observe as O
    import trnlab.nki._trace as T
    import trnlab.nki.isa as isa
    import trnlab.nki.language as nl
    from trnlab.nki._tensor import MemoryRegion, NkiTensor

    return T, O, N, isa, nl, MemoryRegion, NkiTensor


class _Storages:
    """The storages of one kernel call, numbered in the order the kernel met them, and the
    instruction handles its ``nki.isa`` calls returned, in order (``depends_on`` names them)."""

    def __init__(self) -> None:
        self.by_id: dict[int, int] = {}
        self.items: list[Any] = []
        self.instrs: list[Any] = []
        self._instr_ids: dict[int, int] = {}

    def add_instr(self, handle) -> int:
        self._instr_ids[id(handle)] = len(self.instrs)
        self.instrs.append(handle)
        return len(self.instrs) - 1

    def instr(self, handle) -> int | None:
        return self._instr_ids.get(id(handle))

    def add(self, storage) -> int:
        if id(storage) not in self.by_id:
            self.by_id[id(storage)] = len(self.items)
            self.items.append(storage)
        return self.by_id[id(storage)]

    def get(self, storage) -> int | None:
        return self.by_id.get(id(storage))


def key(tr, args: tuple, kwargs: dict, storages: _Storages) -> str:
    """The key of a kernel call: target, numerics, and what its arguments are."""
    *_, NkiTensor = _nki()

    def arg(v):
        if type(v) is NkiTensor:
            storages.add(v._s)
            s = v._s
            return ["hbm", s.name, list(s.shape), s.dtype.name, s.data is not None]
        return ["value", A.encode(v)]

    return json.dumps(
        {
            "mode": "nki",
            "chip": str(tr.params.chip),
            "bufs": int(tr.params.compiler_rotating_buffers),
            "numerics": bool(tr.numerics),
            "args": [arg(a) for a in args],
            "kwargs": [[str(k), arg(v)] for k, v in kwargs.items()],
        },
        sort_keys=True,
    )


# ----------------------------------------------------------------------------------------------
# Recording (in the learner's process)
# ----------------------------------------------------------------------------------------------
def _file(filename: str) -> str:
    base = os.path.basename(filename)
    if filename.startswith("<") or "ipykernel" in filename or not base.endswith(".py"):
        return "<cell>"
    return base


class _Recording:
    """A trace observer (``Trace.observer``) writing the kernel's NKI calls down."""

    def __init__(self, calls: list, storages: _Storages, recorder) -> None:
        self.calls = calls
        self.storages = storages
        self.recorder = recorder
        self.codes: dict[int, int] = {}
        self._keep: list = []  # the code objects numbered (so their ids stay theirs)

    def _code(self, code) -> int:
        if code is None:
            return -1
        if id(code) not in self.codes:
            self.codes[id(code)] = len(self.codes)
            self._keep.append(code)
        return self.codes[id(code)]

    def _site(self, f) -> list:
        T = _nki()[0]
        if f is None:
            return [-1, 0, -1, 0, "tile", "?", "?"]
        s = T.site_of(f)
        outer = f.f_back
        return [
            self._code(f.f_code),
            f.f_lineno,
            self._code(outer.f_code if outer else None),
            outer.f_lineno if outer else 0,
            s.label,
            s.func,
            _file(s.filename),
        ]

    def encode(self, x: Any) -> Any:
        _, _, N, isa, nl, MemoryRegion, NkiTensor = _nki()
        if type(x) is NkiTensor:
            h = self.storages.get(x._s)
            if h is None:
                return {"$": "foreign", "type": "NkiTensor"}
            return _view(h, x)
        if type(x) is isa.NkiInstruction:
            n = self.storages.instr(x)
            return {"$": "foreign", "type": "NkiInstruction"} if n is None else {"$": "i", "n": n}
        if isinstance(x, MemoryRegion):
            return {"$": "mem", "name": x.name}
        if (
            isinstance(x, Enum)
            and type(x).__name__ in _ENUMS
            and getattr(isa, type(x).__name__) is type(x)
        ):
            return {"$": "enum", "cls": type(x).__name__, "name": x.name}
        if (isinstance(x, type) and issubclass(x, np.generic)) or isinstance(x, np.dtype):
            return {"$": "dtype", "name": np.dtype(x).name}
        if callable(x) and not isinstance(x, type):
            name = N._NAMES.get(id(x))
            if name is not None and getattr(nl, name, None) is x:
                return {"$": "op", "name": name}
            name = N._NUMPY.get(x) if isinstance(x, np.ufunc) else None
            if name is not None:
                return {"$": "ufunc", "name": x.__name__}
            return {"$": "foreign", "type": type(x).__name__}
        if isinstance(x, list):
            return [self.encode(v) for v in x]
        if isinstance(x, tuple):
            return {"$": "tuple", "items": [self.encode(v) for v in x]}
        if x is None or isinstance(x, bool | int | float | str | np.generic | np.ndarray):
            try:
                return A._encode(x, A._Budget(), 0)
            except A.AnswerFormatError:
                pass
        return {"$": "foreign", "type": type(x).__name__}

    def returned(self, x: Any) -> Any:
        _, _, _, isa, _, _, NkiTensor = _nki()
        if type(x) is isa.NkiInstruction:
            return {"$": "i", "n": self.storages.add_instr(x)}
        if type(x) is NkiTensor:
            h = self.storages.get(x._s)
            if h is None:
                h = self.storages.add(x._s)
                return {**_view(h, x), "new": True}
            return _view(h, x)
        if isinstance(x, tuple | list):
            return {"$": "tuple", "items": [self.returned(v) for v in x]}
        return None if x is None else {"$": "other"}

    # the observer protocol (trnlab.nki._observe)
    def before(self, qual: str, args: tuple, kwargs: dict, frame) -> list:
        self.recorder._count()
        entry = [
            qual,
            [self.encode(a) for a in args],
            {str(k): self.encode(v) for k, v in kwargs.items()},
            None,
            False,
            self._site(frame),
        ]
        self.calls.append(entry)
        return entry

    def after(self, entry: list, out: Any) -> None:
        entry[3] = self.returned(out)

    def raised(self, entry: list, exc: BaseException) -> None:
        entry[4] = True


def _view(h: int, x) -> dict:
    return {"$": "t", "h": h, "shape": list(x.shape), "strides": list(x.strides), "off": x.offset}


def record(recorder, args: tuple, kwargs: dict) -> Any:
    """Run the recorder's kernel inside the current NKI trace, writing its calls down."""
    T = _nki()[0]
    tr = T.current()
    storages = _Storages()
    k = key(tr, args, kwargs, storages)
    trace = A._Trace()
    recorder._traces[k] = trace
    obs = _Recording(trace.calls, storages, recorder)
    before = tr.observer
    tr.observer = obs
    fn = recorder.kernel
    if not hasattr(fn, "fn"):  # a plain function (an @nki.jit kernel inlines as NKI reads it)
        from trnlab.nki._returns import traced_function

        fn = traced_function(fn, recorder.__name__, stacklevel=3)
    try:
        out = fn(*args, **kwargs)
    except BaseException as exc:
        trace.end = {"raised": type(exc).__name__, "message": str(exc)[: A.MAX_TEXT]}
        raise
    finally:
        tr.observer = before
    trace.ret = obs.returned(out)
    return out


# ----------------------------------------------------------------------------------------------
# Replay (in the clean checker)
# ----------------------------------------------------------------------------------------------
def _int(v: Any) -> bool:
    return type(v) is int


def _decode(x: Any, storages: _Storages) -> Any:
    _, _, N, isa, nl, MemoryRegion, _ = _nki()
    if isinstance(x, list):
        return [_decode(v, storages) for v in x]
    if not isinstance(x, dict):
        return A.decode(x)
    tag = x.get("$")
    if tag == "t":
        return _tensor(x, storages)
    if tag == "i":
        n = x.get("n")
        if not _int(n) or not 0 <= n < len(storages.instrs):
            raise A.GraderReplayError("a kernel trace refers to an instruction it never made")
        return storages.instrs[n]
    if tag == "mem":
        name = x.get("name")
        if name not in MemoryRegion.__members__:
            raise A.GraderReplayError(f"a kernel trace names a memory {name!r} NKI does not have")
        return MemoryRegion[name]
    if tag == "enum":
        cls, name = x.get("cls"), x.get("name")
        enum = getattr(isa, cls, None) if cls in _ENUMS else None
        if enum is None or name not in enum.__members__:
            raise A.GraderReplayError(f"a kernel trace names nisa.{cls}.{name}, which is not NKI")
        return enum[name]
    if tag == "dtype":
        try:
            return np.dtype(A._text(x.get("name"), 16)).type
        except (TypeError, ValueError, SyntaxError, A.AnswerFormatError):
            raise A.GraderReplayError("a kernel trace names a dtype numpy does not know") from None
    if tag == "op":
        name = x.get("name")
        fn = getattr(nl, name, None) if isinstance(name, str) and not name.startswith("_") else None
        if fn is None or N._NAMES.get(id(fn)) != name:
            raise A.GraderReplayError(
                f"a kernel trace passes an operator {name!r} NKI does not have"
            )
        return fn
    if tag == "ufunc":
        name = x.get("name")
        fn = {f.__name__: f for f in N._NUMPY}.get(name)
        if fn is None:
            raise A.GraderReplayError(f"a kernel trace passes numpy.{name}, not an NKI operator")
        return fn
    if tag == "tuple":
        return tuple(_decode(v, storages) for v in A._list(x, "items"))
    if tag == "foreign":
        raise A.GraderReplayError(
            f"your kernel passed NKI a {A._text(x.get('type', 'object'), 80)} it did not get "
            "from NKI or its arguments"
        )
    return A.decode(x)


def _tensor(x: dict, storages: _Storages):
    """The view a trace names, checked against its storage (never outside it)."""
    *_, NkiTensor = _nki()
    h, shape, strides, off = x.get("h"), x.get("shape"), x.get("strides"), x.get("off")
    if not _int(h) or not 0 <= h < len(storages.items):
        raise A.GraderReplayError("a kernel trace refers to a tensor it never made")
    ok = (
        isinstance(shape, list)
        and isinstance(strides, list)
        and 0 < len(shape) == len(strides) <= 8
        and all(_int(n) and 1 <= n <= 2**31 for n in shape)
        and all(_int(s) and -(2**40) <= s <= 2**40 for s in strides)
        and _int(off)
    )
    if not ok:
        raise A.GraderReplayError("a malformed tensor view in a kernel trace")
    s = storages.items[h]
    total = 1
    for n in s.shape:
        total *= n
    lo = off + sum(min(0, st * (n - 1)) for st, n in zip(strides, shape, strict=True))
    hi = off + sum(max(0, st * (n - 1)) for st, n in zip(strides, shape, strict=True))
    if lo < 0 or hi >= total:
        raise A.GraderReplayError(
            f"a kernel trace views elements {lo}..{hi} of a tensor of {total} (outside it)"
        )
    return NkiTensor(s, tuple(shape), tuple(strides), off)


def _bind_returned(ret: Any, out: Any, storages: _Storages, what: str) -> None:
    """Number the storages a replayed call returned as the recorded call says."""
    _, _, _, isa, _, _, NkiTensor = _nki()
    if isinstance(ret, dict) and ret.get("$") == "i":
        if type(out) is not isa.NkiInstruction or ret.get("n") != len(storages.instrs):
            raise A.GraderReplayError(f"{what} returned no instruction handle when replayed")
        storages.add_instr(out)
        return
    if isinstance(ret, dict) and ret.get("$") == "t":
        if type(out) is not NkiTensor:
            raise A.GraderReplayError(f"{what} returned no tensor when replayed")
        if ret.get("new") is True:
            if storages.get(out._s) is not None or ret.get("h") != len(storages.items):
                raise A.GraderReplayError("a malformed kernel trace (tensor numbering)")
            storages.add(out._s)
        view = _view(storages.get(out._s) if storages.get(out._s) is not None else -1, out)
        if {k: ret.get(k) for k in view} != view:
            raise A.GraderReplayError(f"{what} returned another tensor when replayed")
        return
    if isinstance(ret, dict) and ret.get("$") == "tuple":
        items = A._list(ret, "items")
        if not isinstance(out, tuple | list) or len(out) != len(items):
            raise A.GraderReplayError(f"{what} returned something else when replayed")
        for r, o in zip(items, out, strict=True):
            _bind_returned(r, o, storages, what)


class _Sites:
    """Allocation sites of a replay, one :class:`~trnlab.nki._trace.Site` per recorded key."""

    def __init__(self) -> None:
        self.sites: dict = {}

    def forced(self, site: Any) -> tuple:
        T = _nki()[0]
        ok = (
            isinstance(site, list)
            and len(site) == 7
            and all(_int(v) for v in site[:4])
            and all(isinstance(v, str) for v in site[4:])
        )
        if not ok:
            raise A.GraderReplayError("a malformed source location in a kernel trace")
        code, line, outer, outer_line, label, func, file = site
        k = ("replayed", code, line, outer, outer_line)
        s = self.sites.get(k)
        if s is None:
            s = self.sites[k] = T.Site(file[:200], line, label[:100], func[:100])
        return k, s, (s.filename, line, s.func)


def _signature_problem(fn, qual: str, pos: list, kw: dict) -> str | None:
    try:
        inspect.signature(inspect.unwrap(fn)).bind(*pos, **kw)
    except TypeError as err:
        return f"a malformed kernel trace: {qual} {err}"
    return None


def replay(kernel_replay, args: tuple, kwargs: dict) -> Any:
    """Replay the recorded trace for these arguments inside the current NKI trace."""
    T, observe, *_ = _nki()
    tr = T.current()
    storages = _Storages()
    k = key(tr, args, kwargs, storages)
    trace = kernel_replay._traces.get(k)
    if trace is None:
        raise A.GraderReplayError(
            "the grader has no record of your kernel being run on these arguments; re-run "
            "its check cell"
        )
    calls, end = trace["calls"], trace["end"]
    sites = _Sites()
    for i, call in enumerate(calls):
        if not (isinstance(call, list) and len(call) == 6 and isinstance(call[0], str)):
            raise A.GraderReplayError("a malformed kernel trace")
        qual, args_, kwargs_, ret, raised, site = call
        fn = observe.API.get(qual)
        if fn is None:
            raise A.GraderReplayError(f"{qual[:80]} is not part of the NKI API trnlab models")
        if not isinstance(args_, list) or not isinstance(kwargs_, dict) or type(raised) is not bool:
            raise A.GraderReplayError("a malformed kernel trace")
        pos = [_decode(a, storages) for a in args_]
        kw = {str(name): _decode(v, storages) for name, v in kwargs_.items()}
        problem = _signature_problem(fn, qual, pos, kw)
        if problem:
            raise A.GraderReplayError(problem)
        tr.forced = sites.forced(site)
        try:
            out = fn(*pos, **kw)
        except Exception as exc:
            if not raised:
                raise A.GraderReplayError(
                    f"call {i} ({qual}) raised {type(exc).__name__} when replayed but not when "
                    f"your kernel ran: {exc}"
                ) from None
            last = i == len(calls) - 1
            if last and end is not None and end["raised"] == type(exc).__name__:
                raise  # the kernel let NKI's error out, as recorded
            continue  # the kernel caught it, as recorded
        finally:
            tr.forced = None
        if raised:
            raise A.GraderReplayError(
                f"call {i} ({qual}) raised when your kernel ran but not when replayed"
            )
        _bind_returned(ret, out, storages, f"call {i} ({qual})")
    if end is not None:
        raise A._raised(end["raised"])(end["message"])
    return _returned_value(trace.get("ret"), storages)


def _returned_value(ret: Any, storages: _Storages) -> Any:
    if ret is None:
        return None
    if isinstance(ret, dict) and ret.get("$") == "t":
        return _tensor(ret, storages)
    if isinstance(ret, dict) and ret.get("$") == "tuple":
        return tuple(_returned_value(v, storages) for v in A._list(ret, "items"))
    if isinstance(ret, dict) and ret.get("$") in ("other", "i"):
        return None
    raise A.GraderReplayError("a malformed kernel trace (what the kernel returned)")
