"""A learner's answers as plain data: captured in their kernel, checked somewhere else.

The grader never trusts what a submitted notebook says about itself. While the notebook runs
(in its sandbox), every ``Exercise.check(answer)`` call also writes the answer, as plain
JSON-able data, to a file (:func:`install_capture`); a separate clean process rebuilds the
answers (:func:`decode`) and runs the real checks on them. Nothing the learner wrote runs in
that process:

- numbers, strings, booleans, ``None``, lists, tuples, dicts and numpy values travel as data;
- a kernel travels as the calls it made, for each set of arguments the check gave it
  (:class:`KernelRecorder`), and is rebuilt as a :class:`KernelReplay` that makes the same
  calls again: an NKI kernel (labs 04 and 05: ``@nki.jit def kernel(a_t, b)``) as its
  ``nki.language`` / ``nki.isa`` calls, replayed through ``trnlab.nki``, which computes every
  value and every time again (:mod:`trnlab.course._nki_answers`); an engine-level kernel
  ``kernel(ctx, ...)`` as its *kernel-context calls*, replayed on a real context. A replayed
  kernel can only do what a straight-line kernel could: patching the checks, or writing into
  tiles behind the API's back, does not survive the trip;
- anything else is recorded by its type name only and fails its check with a message saying
  what the grader can read.

The encoding (``{"$": tag, ...}`` objects beside plain JSON) is read strictly: an unknown
tag, a wrong shape or too much data is an :class:`AnswerFormatError`, never a crash.
"""

from __future__ import annotations

import inspect
import json
import math
import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = [
    "AnswerFormatError",
    "KernelRecorder",
    "KernelReplay",
    "decode",
    "encode",
    "install_capture",
    "read_captured",
]

#: Limits on what one answer may hold (beyond them it is not graded, and says why).
MAX_ITEMS = 1_000_000  # list items, dict entries and array elements, all nested levels together
MAX_DEPTH = 32
MAX_TEXT = 100_000  # characters of one string
MAX_CALLS = 2_000_000  # kernel-context calls over all of a kernel's traces
#: Numpy dtype kinds carried as data: booleans, integers, floats.
_NUMPY_KINDS = "biuf"
#: The marker line :func:`install_capture` writes first, so a run can tell the hook was in place.
INSTALLED = {"installed": True}


class AnswerFormatError(ValueError):
    """Captured answers that cannot be read back (unknown tag, bad shape, over a limit)."""


class GradingLimitError(RuntimeError):
    """A kernel issued more context calls than the grader records (:data:`MAX_CALLS`)."""


# ----------------------------------------------------------------------------------------------
# Plain data
# ----------------------------------------------------------------------------------------------
class _Budget:
    def __init__(self) -> None:
        self.items = 0

    def take(self, n: int = 1) -> None:
        self.items += n
        if self.items > MAX_ITEMS:
            raise AnswerFormatError(f"the answer holds more than {MAX_ITEMS:,} values")


def encode(answer: Any, recorder: KernelRecorder | None = None) -> Any:
    """``answer`` as JSON-able data (see the module docstring).

    Parameters
    ----------
    answer : object
        What the learner passed to ``check``.
    recorder : KernelRecorder, optional
        The recorder the check ran instead of ``answer`` (a callable answer): its traces are
        the encoded kernel.
    """
    if recorder is not None:
        return {
            "$": "kernel",
            "type": type(answer).__name__,
            "traces": recorder.traces(),
            "params": recorder.params(),
        }
    try:
        return _encode(answer, _Budget(), 0)
    except AnswerFormatError as err:
        return {"$": "opaque", "type": type(answer).__name__, "why": str(err)}


def _encode(x: Any, budget: _Budget, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise AnswerFormatError(f"the answer is nested more than {MAX_DEPTH} levels deep")
    budget.take()
    if x is None or isinstance(x, bool):
        return x
    if x is Ellipsis:
        return {"$": "ellipsis"}
    if isinstance(x, np.generic):
        if x.dtype.kind not in _NUMPY_KINDS:
            raise AnswerFormatError(f"numpy {x.dtype} values are not graded")
        return {"$": "numpy", "dtype": x.dtype.str, "value": _float_safe(x.item())}
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return _float_safe(float(x))
    if isinstance(x, str):
        if len(x) > MAX_TEXT:
            raise AnswerFormatError(f"the answer is a string of more than {MAX_TEXT:,} characters")
        return str(x)
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in _NUMPY_KINDS:
            raise AnswerFormatError(f"numpy arrays of {x.dtype} are not graded")
        budget.take(x.size)
        flat = [_float_safe(v) for v in x.ravel().tolist()]
        return {"$": "ndarray", "dtype": x.dtype.str, "shape": list(x.shape), "data": flat}
    if isinstance(x, list | tuple):
        items = [_encode(v, budget, depth + 1) for v in x]
        return items if isinstance(x, list) else {"$": "tuple", "items": items}
    if isinstance(x, dict):
        pairs = [
            [_encode(k, budget, depth + 1), _encode(v, budget, depth + 1)] for k, v in x.items()
        ]
        return {"$": "dict", "items": pairs}
    return {"$": "opaque", "type": type(x).__name__}


def _float_safe(v: Any) -> Any:
    """Floats that JSON cannot spell (nan, inf) as tagged strings."""
    if isinstance(v, float) and not math.isfinite(v):
        return {"$": "float", "value": repr(v)}
    return v


class Opaque:
    """An answer the grader could not carry (an arbitrary object): its check fails, saying so."""

    def __init__(self, type_name: str, why: str = "") -> None:
        self.type_name = type_name
        self.why = why

    def message(self) -> str:
        why = f" ({self.why})" if self.why else ""
        return (
            f"the grader can only read answers that are numbers, strings, lists, dicts, numpy "
            f"values or (labs 04 and 05) kernel functions; your answer is a {self.type_name}{why}"
        )


def decode(data: Any) -> Any:
    """Rebuild an answer from :func:`encode`'s data; raises :class:`AnswerFormatError`."""
    return _decode(data, _Budget(), 0)


def _decode(x: Any, budget: _Budget, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise AnswerFormatError(f"answer nested more than {MAX_DEPTH} levels deep")
    budget.take()
    if x is None or isinstance(x, bool | int | float):
        return x
    if isinstance(x, str):
        if len(x) > MAX_TEXT:
            raise AnswerFormatError(f"a string of more than {MAX_TEXT:,} characters")
        return x
    if isinstance(x, list):
        return [_decode(v, budget, depth + 1) for v in x]
    if not isinstance(x, dict) or not isinstance(x.get("$"), str):
        raise AnswerFormatError(f"unexpected {type(x).__name__} in a captured answer")
    tag = x["$"]
    if tag == "ellipsis":
        return Ellipsis
    if tag == "float":
        return _special_float(x.get("value"))
    if tag == "tuple":
        return tuple(_decode(v, budget, depth + 1) for v in _list(x, "items"))
    if tag == "dict":
        out = {}
        for pair in _list(x, "items"):
            if not isinstance(pair, list) or len(pair) != 2:
                raise AnswerFormatError("a dict entry is not a [key, value] pair")
            key = _decode(pair[0], budget, depth + 1)
            try:
                out[key] = _decode(pair[1], budget, depth + 1)
            except TypeError:
                raise AnswerFormatError("a dict key that cannot be a key") from None
        return out
    if tag == "numpy":
        dtype = _dtype(x.get("dtype"))
        try:
            return dtype.type(_scalar(x.get("value")))
        except (TypeError, ValueError, OverflowError) as err:
            raise AnswerFormatError(f"a numpy {dtype} value: {err}") from None
    if tag == "ndarray":
        dtype = _dtype(x.get("dtype"))
        shape = _list(x, "shape")
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
            raise AnswerFormatError("an array shape must be non-negative integers")
        data = [_scalar(v) for v in _list(x, "data")]
        budget.take(len(data))
        if math.prod(shape) != len(data):
            raise AnswerFormatError(f"an array of shape {shape} with {len(data)} values")
        try:
            return np.array(data, dtype=dtype).reshape(shape)
        except (TypeError, ValueError, OverflowError) as err:
            raise AnswerFormatError(f"a numpy {dtype} array: {err}") from None
    if tag == "kernel":
        return KernelReplay.from_data(x)
    if tag == "opaque":
        return Opaque(_text(x.get("type", "object")), _text(x.get("why", "")))
    raise AnswerFormatError(f"unknown answer tag {tag!r}")


def _list(x: Mapping, field: str) -> list:
    v = x.get(field)
    if not isinstance(v, list):
        raise AnswerFormatError(f"{x.get('$')!r}: {field!r} must be a list")
    return v


def _text(v: Any, limit: int = 200) -> str:
    if not isinstance(v, str):
        raise AnswerFormatError("expected a string")
    return v[:limit]


def _special_float(v: Any) -> float:
    if v not in ("nan", "inf", "-inf"):
        raise AnswerFormatError(f"not a special float: {v!r}")
    return float(v)


def _scalar(v: Any) -> Any:
    if isinstance(v, dict) and v.get("$") == "float":
        return _special_float(v.get("value"))
    if v is None or not isinstance(v, bool | int | float):
        raise AnswerFormatError(f"a numpy value must be a number, not {type(v).__name__}")
    return v


def _dtype(v: Any) -> np.dtype:
    try:
        dtype = np.dtype(_text(v, 16))
    except (TypeError, ValueError, SyntaxError):  # numpy parses some strings as Python
        raise AnswerFormatError(f"unknown dtype {v!r}") from None
    if dtype.kind not in _NUMPY_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise AnswerFormatError(f"dtype {dtype} is not graded")
    return dtype


# ----------------------------------------------------------------------------------------------
# Kernels: record the context calls, replay them elsewhere
# ----------------------------------------------------------------------------------------------
def _core():
    from trnlab import core

    return core


def _arg_key(value: Any, handles: _Handles) -> list:
    """How a kernel argument is named in a trace's key (an HBM tensor gets a handle)."""
    core = _core()
    if isinstance(value, core.HBMTensor):
        handles.add(value)
        return ["hbm", value.name, list(value.shape), value.fmt, bool(value.written)]
    return ["value", encode(value)]


def _call_key(ctx: Any, args: tuple, kwargs: Mapping, handles: _Handles) -> str:
    key = {
        "chip": str(getattr(ctx.params, "chip", "")),
        "numerics": bool(ctx.numerics),
        "args": [_arg_key(a, handles) for a in args],
        "kwargs": [[str(k), _arg_key(v, handles)] for k, v in kwargs.items()],
    }
    return json.dumps(key, sort_keys=True)


class _Handles:
    """Tiles and HBM tensors of one kernel call, numbered in the order the kernel met them."""

    def __init__(self) -> None:
        self.by_id: dict[int, int] = {}
        self.objects: list[Any] = []

    def add(self, obj: Any) -> int:
        if id(obj) not in self.by_id:
            self.by_id[id(obj)] = len(self.objects)
            self.objects.append(obj)
        return self.by_id[id(obj)]

    def get(self, obj: Any) -> int | None:
        return self.by_id.get(id(obj))


def _encode_operand(x: Any, handles: _Handles) -> Any:
    core = _core()
    if isinstance(x, core.View):
        h = handles.get(x.tile)
        return (
            {"$": "view", "h": h, "r": [x.p0, x.p1, x.f0, x.f1]} if h is not None else _foreign(x)
        )
    if isinstance(x, core.HBMView):
        h = handles.get(x.tensor)
        return (
            {"$": "hview", "h": h, "r": [x.r0, x.r1, x.c0, x.c1]} if h is not None else _foreign(x)
        )
    if isinstance(x, core.Tile | core.HBMTensor):
        h = handles.get(x)
        return {"$": "ref", "h": h} if h is not None else _foreign(x)
    if isinstance(x, list):
        return [_encode_operand(v, handles) for v in x]
    if isinstance(x, tuple):
        return {"$": "tuple", "items": [_encode_operand(v, handles) for v in x]}
    try:
        return _encode(x, _Budget(), 0)
    except AnswerFormatError:
        return _foreign(x)


def _foreign(x: Any) -> dict:
    return {"$": "foreign", "type": type(x).__name__}


class _Trace:
    def __init__(self) -> None:
        self.calls: list[list] = []
        self.end: dict | None = None
        self.ret: Any = None  # an NKI kernel's return value (handles)


class _RecordingContext:
    """Stands in for the kernel context: forwards everything, writes down the public calls."""

    def __init__(self, ctx: Any, trace: _Trace, handles: _Handles, recorder: KernelRecorder):
        object.__setattr__(self, "_ctx", ctx)
        object.__setattr__(self, "_trace", trace)
        object.__setattr__(self, "_handles", handles)
        object.__setattr__(self, "_recorder", recorder)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._ctx, name)
        if name.startswith("_") or not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            self._recorder._count()
            entry = [
                name,
                [_encode_operand(a, self._handles) for a in args],
                {str(k): _encode_operand(v, self._handles) for k, v in kwargs.items()},
                None,
                False,
            ]
            self._trace.calls.append(entry)
            try:
                out = value(*args, **kwargs)
            except Exception:
                entry[4] = True
                raise
            core = _core()
            if isinstance(out, core.Tile | core.HBMTensor):
                entry[3] = self._handles.add(out)
            elif isinstance(out, core.TilePool):  # its buffers, numbered in order
                entry[3] = [self._handles.add(t) for t in out.buffers]
            return out

        return call

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._ctx, name, value)


class KernelRecorder:
    """A callable standing in for a learner's kernel: runs it, recording each call's trace.

    ``recorder(ctx, *args, **kwargs)`` calls ``kernel`` with a context that forwards every
    call to ``ctx`` and writes down the public ones (method, operands as tile handles and
    regions, return handle, whether it raised), under a key made of the chip, numerics and the
    arguments' shapes and formats. :meth:`traces` returns them as JSON-able data.
    """

    def __init__(self, kernel: Callable) -> None:
        self.kernel = kernel
        self._traces: dict[str, _Trace] = {}
        self._calls = 0
        fn = getattr(kernel, "fn", kernel)  # an @nki.jit kernel's function
        self.__name__ = getattr(kernel, "__name__", type(kernel).__name__)
        try:  # NKI names a kernel's HBM tensors after its parameters: keep the learner's
            self.__signature__ = inspect.signature(fn)
        except (TypeError, ValueError):
            pass

    def _count(self) -> None:
        self._calls += 1
        if self._calls > MAX_CALLS:
            raise GradingLimitError(
                f"the kernel made more than {MAX_CALLS:,} kernel-context calls, more than the "
                "grader records"
            )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from . import _nki_answers

        if _nki_answers.active():  # an NKI kernel, called by trnlab.nki with HBM tensors
            return _nki_answers.record(self, args, kwargs)
        ctx, args = args[0], args[1:]
        handles = _Handles()
        key = _call_key(ctx, args, kwargs, handles)
        trace = _Trace()
        self._traces[key] = trace
        try:
            return self.kernel(_RecordingContext(ctx, trace, handles, self), *args, **kwargs)
        except BaseException as exc:
            trace.end = {"raised": type(exc).__name__, "message": str(exc)[:MAX_TEXT]}
            raise

    def params(self) -> list[list[str]]:
        """The kernel's parameters as ``[name, kind, has a default]`` (what NKI names its HBM
        tensors by, and which arguments a call may leave out)."""
        sig = getattr(self, "__signature__", None)
        if not sig:
            return []
        return [[p.name, p.kind.name, p.default is not p.empty] for p in sig.parameters.values()]

    def traces(self) -> list[dict]:
        return [
            {"key": k, "calls": t.calls, "end": t.end, "ret": t.ret}
            for k, t in self._traces.items()
        ]


_RAISED_TYPES: dict[str, type] = {}


def _raised(name: str) -> type:
    """An exception class called ``name`` (so messages naming the type read as the learner's)."""
    if not name.isidentifier():
        name = "KernelError"
    if name not in _RAISED_TYPES:
        _RAISED_TYPES[name] = type(name, (Exception,), {"__module__": "trnlab.course.answers"})
    return _RAISED_TYPES[name]


class GraderReplayError(RuntimeError):
    """A recorded kernel that cannot be replayed as recorded (missing call, forged trace)."""


class KernelReplay:
    """A learner's kernel rebuilt from its traces: replays the recorded calls on a real context.

    Calling it with a context and arguments looks up the trace recorded for the same chip,
    numerics and argument shapes, and issues its calls, in order, on that context (which
    checks every hardware rule and computes the numbers again). Only public methods of
    :class:`trnlab.core.KernelContext` can be replayed.
    """

    def __init__(self, type_name: str, traces: Mapping[str, Mapping], params=None) -> None:
        self.type_name = type_name
        self._traces = dict(traces)
        if params:
            self.__signature__ = params

    @classmethod
    def from_data(cls, data: Mapping) -> KernelReplay:
        traces = {}
        total = 0
        for t in _list(data, "traces"):
            if not isinstance(t, dict) or not isinstance(t.get("key"), str):
                raise AnswerFormatError("a kernel trace without a key")
            calls = _list(t, "calls")
            total += len(calls)
            if total > MAX_CALLS:
                raise AnswerFormatError(f"kernel traces of more than {MAX_CALLS:,} calls")
            end = t.get("end")
            if end is not None and not (
                isinstance(end, dict)
                and isinstance(end.get("raised"), str)
                and isinstance(end.get("message"), str)
            ):
                raise AnswerFormatError("a kernel trace with a malformed end")
            traces[t["key"]] = {"calls": calls, "end": end, "ret": t.get("ret")}
        name = _text(data.get("type", "function"), 100)
        # The rebuilt object carries the learner's type name, so a check that names the type
        # of a wrong answer ("should be a number, not function") reads as it did in their run.
        replay_type = type(name if name.isidentifier() else "function", (cls,), {})
        return replay_type(name, traces, _signature(data.get("params", [])))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from . import _nki_answers

        if _nki_answers.active():  # an NKI kernel: replayed through trnlab.nki
            return _nki_answers.replay(self, args, kwargs)
        ctx, args = args[0], args[1:]
        handles = _Handles()
        key = _call_key(ctx, args, kwargs, handles)
        trace = self._traces.get(key)
        if trace is None:
            raise GraderReplayError(
                "the grader has no record of your kernel being run on these arguments; re-run "
                "its check cell"
            )
        allowed = _replayable_methods()
        calls = trace["calls"]
        end = trace["end"]
        for i, call in enumerate(calls):
            if not (isinstance(call, list) and len(call) == 5):
                raise GraderReplayError("a malformed kernel trace")
            name, args_, kwargs_, ret, raised = call
            if name not in allowed:
                raise GraderReplayError(f"ctx.{name} is not part of the kernel API")
            if not isinstance(args_, list) or not isinstance(kwargs_, dict):
                raise GraderReplayError("a malformed kernel trace")
            pos = [_decode_operand(a, handles) for a in args_]
            kw = {str(k): _decode_operand(v, handles) for k, v in kwargs_.items()}
            try:
                out = getattr(ctx, name)(*pos, **kw)
            except Exception as exc:
                if not raised:
                    raise
                last = i == len(calls) - 1
                if last and end is not None and end["raised"] == type(exc).__name__:
                    raise  # the kernel let the context's error out, as recorded
                continue  # the kernel caught it, as recorded
            if raised:
                raise GraderReplayError(
                    f"call {i} (ctx.{name}) raised when your kernel ran but not when replayed"
                )
            if ret is not None:
                _add_returned(ret, out, handles)
        if end is not None:
            raise _raised(end["raised"])(end["message"])
        return None


_KINDS = {k.name: k for k in inspect._ParameterKind}


#: What a replayed kernel's signature shows for a default the learner's kernel had.
_RECORDED_DEFAULT = "<default>"


def _signature(params: Any) -> inspect.Signature | None:
    """A recorded kernel's parameters (names, kinds, whether each has a default) as a
    signature, or None. A default's value is not recorded (the replay never runs the kernel's
    code); a stand-in lets a call that left the argument out bind as it did for the learner."""
    if not isinstance(params, list) or not params:
        return None
    try:
        return inspect.Signature(
            [
                inspect.Parameter(
                    _text(p[0], 100),
                    _KINDS[_text(p[1], 40)],
                    default=_RECORDED_DEFAULT if p[2:] == [True] else inspect.Parameter.empty,
                )
                for p in params
            ]
        )
    except (TypeError, ValueError, KeyError, IndexError) as err:
        raise AnswerFormatError(f"a kernel's recorded parameters are malformed ({err})") from None


def _add_returned(ret: Any, out: Any, handles: _Handles) -> None:
    """Number what a replayed call returned as the recorded call's handles ``ret`` say: one
    handle for a tile or tensor, a list of them for a pool's buffers."""
    objs = out.buffers if isinstance(out, _core().TilePool) else [out]
    want = ret if isinstance(ret, list) else [ret]
    if len(want) != len(objs):
        raise GraderReplayError("a malformed kernel trace (a pool's buffers)")
    for h, obj in zip(want, objs, strict=True):
        if type(h) is not int or h != len(handles.objects):
            raise GraderReplayError("a malformed kernel trace (handle numbering)")
        handles.add(obj)


def _replayable_methods() -> frozenset[str]:
    ctx = _core().KernelContext
    return frozenset(n for n in dir(ctx) if not n.startswith("_") and callable(getattr(ctx, n)))


def _decode_operand(x: Any, handles: _Handles) -> Any:
    if isinstance(x, list):
        return [_decode_operand(v, handles) for v in x]
    if isinstance(x, dict) and x.get("$") in ("view", "hview", "ref"):
        h = x.get("h")
        if not isinstance(h, int) or isinstance(h, bool) or not 0 <= h < len(handles.objects):
            raise GraderReplayError("a kernel trace refers to a tile it never made")
        obj = handles.objects[h]
        if x["$"] == "ref":
            return obj
        r = x.get("r")
        if not (isinstance(r, list) and len(r) == 4 and all(type(v) is int for v in r)):
            raise GraderReplayError("a malformed region in a kernel trace")
        return obj[r[0] : r[1], r[2] : r[3]]  # indexing re-checks the region
    if isinstance(x, dict) and x.get("$") == "tuple":
        return tuple(_decode_operand(v, handles) for v in _list(x, "items"))
    if isinstance(x, dict) and x.get("$") == "foreign":
        raise GraderReplayError(
            f"your kernel passed the context a {_text(x.get('type', 'object'), 80)} it did not "
            "get from the context or its arguments"
        )
    return decode(x)


# ----------------------------------------------------------------------------------------------
# Capture in the learner's kernel; read back in the checker
# ----------------------------------------------------------------------------------------------
def install_capture(path: str | os.PathLike) -> None:
    """Make every ``Exercise.check`` in this process also append its answer to ``path``.

    Used by the grader's sandboxed run (an IPython startup file calls it). Each line is
    ``{"key": exercise key, "answer": encoded answer}``; the latest line of a key wins. A
    callable answer is checked through a :class:`KernelRecorder`, so its traces are recorded.
    """
    from trnlab.exercises._exercise import Exercise

    original = Exercise.check
    path = os.fspath(path)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(INSTALLED) + "\n")

    def check(self, answer=None):
        recorder = (
            KernelRecorder(answer) if callable(answer) and not isinstance(answer, type) else None
        )
        data = None if recorder is not None else encode(answer)
        try:
            return original(self, recorder if recorder is not None else answer)
        finally:
            if recorder is not None:
                data = encode(answer, recorder)
            line = json.dumps({"key": str(self.key), "answer": data})
            with open(path, "a", encoding="utf-8") as f:
                f.write(line + "\n")

    check.__doc__ = original.__doc__
    Exercise.check = check


def read_captured(text: str) -> tuple[dict[str, Any], bool]:
    """``(key -> encoded answer, hook installed)`` from a capture file's text (latest wins).

    Raises
    ------
    AnswerFormatError
        If a line is not a capture record.
    """
    found: dict[str, Any] = {}
    installed = False
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise AnswerFormatError(f"line {n} of the captured answers is not JSON") from None
        if record == INSTALLED:
            installed = True
            continue
        if not isinstance(record, dict) or set(record) != {"key", "answer"}:
            raise AnswerFormatError(f"line {n} of the captured answers is not a capture record")
        if not isinstance(record["key"], str):
            raise AnswerFormatError(f"line {n}: the exercise key must be a string")
        found[record["key"]] = record["answer"]
    return found, installed
