"""Inside a fresh grading sandbox: check one submission's captured answers with the real checks.

``python -I -m trnlab.course._check_answers`` reads a JSON request on stdin::

    {"lab": "lab01", "variant": {"CLOCK_CHIP": "trn1"}, "answers": "<capture file text>",
     "errors": [...cells that raised...], "order": [["lab01", "clock"], ...]}

and prints ``{"rows": [{"exercise", "status", "message"}], "other_errors": [...],
"capture_installed": bool, "problem": null or str}``. No student code runs here: the process
starts from a clean interpreter (``python -I``) in an empty folder, imports trnlab read-only,
rebuilds the lab's exercises for the student's variant, forces solutions and strict mode off,
and checks each captured answer (data, or a replayed kernel; see :mod:`trnlab.course.answers`).

``{"selftest": "lab05"}`` instead checks that every reference answer of the lab survives the
trip (encode, JSON, decode, check) and passes; the grader runs it before grading, which also
warms the numba cache the graded runs start from.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from typing import Any

from trnlab.course import answers as A

MAX_REQUEST = 256 * 2**20
LAB = re.compile(r"lab\d\d")
PASSED, FAILED, NOT_ATTEMPTED, ERROR = "passed", "failed", "not attempted", "error"


def _module(lab: str):
    if not isinstance(lab, str) or not LAB.fullmatch(lab):
        raise LookupError(f"{lab!r} is not a lab (lab00, lab01, ...)")
    try:
        return importlib.import_module(f"trnlab.exercises.{lab}")
    except ModuleNotFoundError:
        raise LookupError(f"there are no exercises for {lab}") from None


def _exercises(module) -> list:
    from trnlab.exercises import Exercise

    return [v for v in vars(module).values() if isinstance(v, Exercise)]


def _key_of(lab: str, attribute: str) -> str | None:
    try:
        module = _module(lab)
    except LookupError:
        return None
    return getattr(getattr(module, str(attribute), None), "key", None)


def _setup(module, variant: dict) -> None:
    """Rebuild the lab's variant-aware exercises (ValueError if the variant is not allowed)."""
    if not isinstance(variant, dict):
        raise ValueError("the variant must be a mapping of lab parameters")
    if not variant:
        return
    if not hasattr(module, "setup"):
        raise ValueError(f"{module.__name__} has no variants, but {sorted(variant)} were given")
    module.setup(**{str(k).lower(): v for k, v in variant.items()})


def _check(exercise, encoded: Any) -> tuple[str, str]:
    try:
        answer = A.decode(encoded)
    except A.AnswerFormatError as err:
        return FAILED, f"the grader could not read your answer: {err}"
    if isinstance(answer, A.Opaque):
        return FAILED, answer.message()
    result = exercise.check(answer)
    return result.status, result.message


def grade(request: dict) -> dict:
    from trnlab import exercises

    exercises.configure(strict=False, solutions=False)
    module = _module(request["lab"])
    _setup(module, request.get("variant") or {})
    lab_exercises = _exercises(module)
    by_key = {e.key: e for e in lab_exercises}

    # A cell that raised belongs to the exercise it checks, if it checks one of this lab's.
    raised: dict[str, str] = {}
    other: list[str] = []
    for e in request.get("errors") or []:
        key = None
        calls = e.get("calls") or []
        if calls and isinstance(calls[0], list) and len(calls[0]) == 2:
            key = _key_of(*map(str, calls[0]))
        if key in by_key:
            raised.setdefault(key, str(e.get("error", ""))[:300])
        else:
            other.append(f"cell {int(e.get('cell', -1))}: {str(e.get('error', ''))[:300]}")

    problem = None
    try:
        captured, installed = A.read_captured(request.get("answers") or "")
    except A.AnswerFormatError as err:
        captured, installed = {}, False
        problem = f"the answers captured from the run could not be read ({err})"

    # Rows in the order of the notebook's check cells, then the lab's other exercises.
    order = [_key_of(*map(str, c)) for c in request.get("order") or [] if len(c) == 2]
    keys = list(dict.fromkeys([k for k in order if k in by_key] + list(by_key)))
    rows = []
    for key in keys:
        if key in raised:
            status, message = ERROR, f"the check cell raised {raised[key]}"
        elif key in captured:
            status, message = _check(by_key[key], captured[key])
        else:
            status, message = NOT_ATTEMPTED, "its check cell did not run"
        rows.append({"exercise": key, "status": status, "message": message})
    return {
        "rows": rows,
        "other_errors": other,
        "capture_installed": installed,
        "problem": problem,
    }


def selftest(lab: str, variant: dict | None = None) -> dict:
    """Every reference answer of ``lab``, encoded, decoded and checked: what did not pass."""
    from trnlab import exercises

    exercises.configure(strict=False, solutions=False)
    module = _module(lab)
    _setup(module, variant or {})
    failures = []
    checked = 0
    for ex in _exercises(module):
        try:
            reference = ex.reference()
        except ValueError:
            continue  # no reference solution to try
        recorder = A.KernelRecorder(reference) if callable(reference) else None
        if recorder is not None:
            ex.check(recorder)
        data = json.loads(json.dumps(A.encode(reference, recorder)))
        status, message = _check(ex, data)
        checked += 1
        if status != PASSED:
            failures.append(f"{ex.key}: {status}: {message}")
    return {"failures": failures, "checked": checked}


def main() -> int:
    out = sys.stdout
    request = json.loads(sys.stdin.buffer.read(MAX_REQUEST))
    try:
        if "selftest" in request:
            result = selftest(request["selftest"], request.get("variant"))
        else:
            result = grade(request)
    except (LookupError, ValueError, TypeError) as err:
        result = {"rows": [], "other_errors": [], "capture_installed": False, "problem": str(err)}
    out.write(json.dumps(result))
    out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
