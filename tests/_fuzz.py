"""Machinery of the public-API fuzz test (``test_fuzz_public_api.py``): argument kinds with their
good and bad values, a per-call watchdog, and the verdict on what a call did.

A target is a callable plus a table of its arguments (:class:`Arg`): a strategy of values the
function should accept and a strategy of hostile ones (None, wrong types, near-miss names, 0,
negatives, NaN, Inf, huge numbers, empty or 1-D/3-D arrays, bad shapes, non-boolean flags).
Each example calls the target with every argument valid, or one or several of them hostile,
under a watchdog, and :func:`verdict` accepts only

- a result with no NaN and no negative time, cost, size or rate anywhere in it, or
- a :class:`trnlab.TrnlabError` whose message names the bad argument or its value.

A hostile value must be refused (a bad value silently accepted, clamped or defaulted fails), so
each argument's table lists as "bad" only values the function has to refuse. Anything else
fails: a raw Python/numpy/numba error, a NaN, a negative time, or a call that
overruns its time budget (a hang).
"""

from __future__ import annotations

import dataclasses
import math
import re
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

from tests._load import load_scaled
from trnlab import TrnlabError

# --- hostile values ---------------------------------------------------------------------------

NAN, INF = math.nan, math.inf
#: Values wrong for almost any argument.
JUNK = (None, object(), [], {}, (), b"bytes", 1j, "", "   ", print)
NUMBERS_BAD = (0, -1, -7, -0.5, NAN, INF, -INF, 1e308, 2**63, 10**30, True, False, "8", 1.5)
FLAGS_BAD = ("yes", "no", "True", 0, 1, 2, None, 1.0, NAN, [], "false")
SHAPES_BAD = (
    (),
    (0,),
    (5,),
    (0, 0),
    (0, 4),
    (4, 0),
    (-1, 4),
    (4, -3),
    (1, 2, 3),
    (1.5, 2),
    ("a", 2),
    (True, 4),
    (2**40, 2**40),
    (NAN, 4),
    None,
    "128x128",
)
ARRAYS_BAD = (
    np.zeros((0, 0), np.float32),
    np.zeros((0, 5), np.float32),
    np.zeros((5, 0), np.float32),
    np.ones(7, np.float32),
    np.ones((2, 3, 4), np.float32),
    np.ones((3, 3), np.int64),
    np.ones((3, 3), bool),
    np.full((3, 3), np.nan, np.float32),
    np.full((3, 3), np.inf, np.float32),
    np.array([["a", "b"]]),
    np.float32(3.0),
    [[1.0, 2.0], [3.0]],
)


def name_variants(names: Sequence[str]) -> st.SearchStrategy[str]:
    """Valid names in other cases and with spaces around them (all must be accepted)."""
    return st.sampled_from(list(names)).flatmap(
        lambda n: st.sampled_from([n, n.upper(), n.title(), f" {n} "])
    )


def near_misses(names: Sequence[str]) -> st.SearchStrategy[str]:
    """Names that are almost right: a letter dropped or doubled, a typo, a suffix, unknowns."""

    def mangle(n: str) -> st.SearchStrategy[str]:
        cut = n[:-1] or "x"
        return st.sampled_from([cut, n + n[-1], n + "x", n.replace("_", "-") + "!", "z" + n[1:]])

    valid = {n.strip().lower() for n in names}
    unknown = [
        w
        for w in ("", "unknown", "none", "NaN", "0", "trn9", "h999", "\u2603")
        if w.lower() not in valid
    ]
    return st.one_of(
        st.sampled_from(list(names))
        .flatmap(mangle)
        .filter(lambda w: w.strip().lower() not in valid),
        st.sampled_from(unknown),
    )


@dataclasses.dataclass(frozen=True)
class Arg:
    """One argument of a target: values it should accept and values that probe it.

    ``words`` are extra words a message may use for this argument instead of its name
    ("format" for ``fmt``); a message naming the argument, a word, or the bad value passes
    the teaching check.
    """

    good: st.SearchStrategy
    bad: st.SearchStrategy | None  # None: the target must accept anything it is given here
    words: tuple[str, ...] = ()
    canon: Callable[[Any], Any] | None = None  # a good value's canonical spelling (names)


def name(options: Sequence[str], words: tuple[str, ...] = (), extra_bad=()) -> Arg:
    """A name chosen from ``options`` (case-insensitive): near misses and junk are bad."""
    bad = st.one_of(near_misses(options), st.sampled_from((*JUNK, 5, 1.5, NAN, *tuple(extra_bad))))
    return Arg(name_variants(options), bad, words, canon=canonical_name)


def canonical_name(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def whole(
    lo: int = 1,
    hi: int = 64,
    words: tuple[str, ...] = (),
    bad_lo: int | None = None,
    bounded: bool = False,
) -> Arg:
    """A whole number drawn from lo..hi; zero, negatives, fractions, NaN and junk are bad, and
    huge values too when the argument has a documented upper bound (``bounded``)."""
    huge = (hi * 1000 + 7, 2**62, 10**30) if bounded else ()
    below = tuple(v for v in (lo - 1, -1, -(2**31), bad_lo) if v is not None and v < lo)
    bad = st.sampled_from(below + huge + (1.5, NAN, INF, True, "4", None, [], 2.0))
    return Arg(st.integers(lo, hi), bad, words)


def real(lo: float, hi: float, words: tuple[str, ...] = (), lo_open: bool = True) -> Arg:
    """A finite number in [lo, hi] (good values; ``hi`` bounds what is drawn, not what is
    allowed); NaN, Inf, below ``lo``, bools and junk are bad."""
    bad = [NAN, INF, -INF, True, None, "1.0", [], 1j]
    bad += [
        v
        for v in (lo - 1.0, -1.0, -1e-9, lo if lo_open else None)
        if v is not None and (v < lo or (lo_open and v == lo))
    ]
    return Arg(st.floats(lo, hi, exclude_min=lo_open, allow_nan=False), st.sampled_from(bad), words)


def flag(words: tuple[str, ...] = ()) -> Arg:
    return Arg(st.booleans(), st.sampled_from(FLAGS_BAD), words)


def shape2(lo: int = 1, hi: int = 64, words: tuple[str, ...] = ("shape",)) -> Arg:
    good = st.tuples(st.integers(lo, hi), st.integers(lo, hi))
    return Arg(good, st.sampled_from(SHAPES_BAD + JUNK[:3]), words)


def matrix(lo: int = 1, hi: int = 40, words: tuple[str, ...] = ()) -> Arg:
    good = st.tuples(st.integers(lo, hi), st.integers(lo, hi)).map(
        lambda s: np.random.default_rng(s[0] * 97 + s[1]).standard_normal(s).astype(np.float32)
    )
    return Arg(good, st.sampled_from(ARRAYS_BAD + JUNK[:4] + ("abc", 3.0)), words)


def fixed(value: Any, bad: Sequence[Any] = JUNK, words: tuple[str, ...] = ()) -> Arg:
    """One good value (an object the target needs) and generic junk as bad values."""
    return Arg(st.just(value), st.sampled_from(list(bad)), words)


def choice(good: Sequence[Any], bad: Sequence[Any], words: tuple[str, ...] = ()) -> Arg:
    return Arg(st.sampled_from(list(good)), st.sampled_from(list(bad)), words)


# --- targets ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Target:
    """A public callable and its argument table.

    ``call(**kwargs)`` runs it (for a method, ``call`` builds the object first). ``nan_ok``:
    NaN in array results is data (quantising NaN gives NaN), not a model failure. ``examples``
    overrides the default budget for a slow target; ``budget_s`` is the watchdog's limit on an
    idle machine (stretched by the load, as the grading tests' limits are).
    """

    name: str
    call: Callable[..., Any]
    args: Mapping[str, Arg]
    nan_ok: bool = False
    examples: int | None = None
    budget_s: float = 20.0
    check: Callable[[Any, dict], None] | None = None


def draw_call(data: st.DataObject, target: Target) -> tuple[dict, dict, list[str]]:
    """Draw one call: ``(good, kwargs, bad)``: every argument's good value, the call's values
    (the good ones with one or several replaced by hostile ones, or none), and which."""
    names = list(target.args)
    probed = [n for n in names if target.args[n].bad is not None]
    mode = data.draw(st.sampled_from(["good", "one", "one", "one", "several"]), label="mode")
    bad: list[str] = []
    if probed and mode == "one":
        bad = [data.draw(st.sampled_from(probed), label="bad argument")]
    elif probed and mode == "several":
        bad = data.draw(st.lists(st.sampled_from(probed), min_size=1, unique=True), label="bad")
    good = {n: data.draw(target.args[n].good, label=n) for n in names}
    kwargs = dict(good)
    for n in bad:
        kwargs[n] = data.draw(target.args[n].bad, label=f"bad {n}")
    return good, kwargs, bad


# --- the watchdog -----------------------------------------------------------------------------


class Overrun(BaseException):
    """A call that did not return within its budget (a hang, for the fuzz test)."""


def run_with_budget(fn: Callable[[], Any], seconds: float) -> Any:
    """``fn()``, interrupted by :class:`Overrun` if it runs longer than ``seconds``.

    In the main thread a SIGALRM timer raises inside the call (Python code, such as a kernel
    recording loop, stops at once; compiled code at its next return to Python). Elsewhere
    (a worker thread of a test runner) the call runs on a daemon thread and the test gives up
    waiting for it.
    """
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGALRM"):

        def alarm(signum, frame):
            raise Overrun(f"still running after {seconds:g} s")

        old = signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            return fn()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
    box: dict[str, Any] = {}

    def work():
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc

    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        raise Overrun(f"still running after {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


# --- the verdict ------------------------------------------------------------------------------

#: Result fields that are times, costs, sizes or rates: never negative.
NONNEGATIVE = re.compile(
    r"(latency|time|_s$|^s$|seconds|cost|price|usd|energy|joule|power|watt|bytes|bandwidth|"
    r"busbw|algbw|flops|tokens|memory|capacity|duration|step|throughput|mfu|utilisation)",
    re.IGNORECASE,
)


def audit(value: Any, path: str, nan_ok: bool, seen: set[int] | None = None, depth: int = 0):
    """Problems in a result: NaN (unless ``nan_ok`` for array data), and negative numbers in
    fields whose names say they are times, costs, sizes or rates. Returns a list of strings."""
    seen = set() if seen is None else seen
    if depth > 6 or id(value) in seen:
        return []
    problems: list[str] = []
    leaf = path.rsplit(".", 1)[-1].rsplit("[", 1)[0]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return []
    if isinstance(value, int | float | np.integer | np.floating):
        v = float(value)
        if math.isnan(v):
            problems.append(f"{path} is NaN")
        elif v < 0 and NONNEGATIVE.search(leaf):
            problems.append(f"{path} = {v:g} is negative")
        return problems
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f" and value.size:
            if not nan_ok and np.isnan(value).any():
                problems.append(f"{path} holds NaN")
            finite = value[~np.isnan(value)]
            if NONNEGATIVE.search(leaf) and finite.size and finite.min() < 0:
                problems.append(f"{path} holds negative values")
        return problems
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            problems += audit(
                getattr(value, f.name, None), f"{path}.{f.name}", nan_ok, seen, depth + 1
            )
        return problems
    if isinstance(value, Mapping):
        for k, v in list(value.items())[:200]:
            problems += audit(v, f"{path}[{k!r}]", nan_ok, seen, depth + 1)
        return problems
    if isinstance(value, list | tuple):
        for i, v in enumerate(value[:200]):
            problems += audit(v, f"{path}[{i}]", nan_ok, seen, depth + 1)
    return problems


def _mentions(message: str, argname: str, value: Any, words: Sequence[str]) -> bool:
    low = message.lower()
    keys = [argname, argname.replace("_", " "), *words]
    if any(k.lower() in low for k in keys):
        return True
    texts = [] if isinstance(value, np.ndarray) else [repr(value), str(value)]
    for text in texts:
        if text and len(text) <= 40 and text.strip() and text.lower() in low:
            return True
    if isinstance(value, np.ndarray | list | dict | tuple) and not isinstance(value, str):
        try:
            shape = np.shape(value) if not isinstance(value, dict) else ()
        except ValueError:  # ragged
            shape = ()
        return (bool(shape) and str(tuple(shape)) in message) or "shape" in low or "array" in low
    return False


def _brief(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"ndarray{value.shape}:{value.dtype}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def verdict(
    target: Target,
    kwargs: dict,
    bad: list[str],
    outcome: Any,
    error: BaseException | None,
    good_refused: bool = False,
) -> str | None:
    """None if the call behaved, else what went wrong (the fuzz test fails with it).

    ``good_refused``: the same call with every argument good was refused already (a valid name
    the chosen chip lacks...), so the message need not be about the hostile argument."""
    shown = ", ".join(f"{k}={_brief(v)}" for k, v in kwargs.items())
    where = f"{target.name}({shown})"
    if isinstance(error, Overrun):
        return f"HANG: {where} {error}"
    if error is not None:
        if not isinstance(error, TrnlabError):
            return f"RAW ERROR: {where} raised {type(error).__name__}: {error}"
        msg = str(error)
        if len(msg) < 20:
            return f"TERSE ERROR: {where} raised {type(error).__name__}({msg!r})"
        if len(bad) == 1 and not good_refused:
            a = bad[0]
            if not _mentions(msg, a, kwargs[a], target.args[a].words):
                return (
                    f"UNHELPFUL ERROR: {where}: bad {a}={kwargs[a]!r}, but the message names "
                    f"neither the argument nor the value: {msg}"
                )
        return None
    if bad:
        return f"ACCEPTED: {where} returned normally, but {', '.join(bad)} should be refused"
    problems = audit(outcome, "result", target.nan_ok)
    if target.check is not None and not problems:
        try:
            target.check(outcome, kwargs)
        except AssertionError as exc:
            problems.append(str(exc))
    if problems:
        return f"BAD RESULT: {where} accepted, but " + "; ".join(problems[:5])
    return None


def call_once(target: Target, kwargs: dict) -> tuple[Any, BaseException | None]:
    try:
        budget = load_scaled(target.budget_s)  # stretched by the run queue: shared cores
        return run_with_budget(lambda: target.call(**kwargs), budget), None
    except Overrun as exc:
        return None, exc
    except Exception as exc:  # judged by verdict()
        return None, exc


def probe(target: Target, good: dict, kwargs: dict, bad: list[str]) -> str | None:
    """Call the target with the good arguments, then (if any are hostile) with the hostile
    ones; the first problem found, or None."""
    out, err = call_once(target, good)
    problem = verdict(target, good, [], out, err)
    if problem:
        return problem
    if err is not None:
        plain = {k: (a.canon(good[k]) if a.canon else good[k]) for k, a in target.args.items()}
        if plain != good:
            _out3, err3 = call_once(target, plain)
            if err3 is None:
                return (
                    f"NAME SPELLING: {target.name} refused {_brief(good)} ({err}) but accepts "
                    f"the same names in lower case without spaces: names are case-insensitive"
                )
    if not bad:
        return None
    out2, err2 = call_once(target, kwargs)
    return verdict(target, kwargs, bad, out2, err2, good_refused=err is not None)
