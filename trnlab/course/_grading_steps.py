"""One submitted notebook's grade, in two sandboxed steps (see :mod:`trnlab.course.grading`).

- :func:`read_submission`: the file read into memory and parsed as plain JSON (no code runs);
- step 1, :func:`run_notebook`: the notebook executed in a sandbox by
  :mod:`trnlab.course._run_notebook`, which hands back the answers its checks recorded;
- step 2, :func:`check_answers`: those answers checked in a second, clean sandbox by
  :mod:`trnlab.course._check_answers`;
- :func:`grade_one`: both, and the CSV rows (a problem of the submission as a whole is a row
  with an empty exercise).

What comes back from the first sandbox is the student's to influence and is read as untrusted
data: its shape is checked, its size bounded, and it can only lower a grade (a cell that raised
makes its exercise an ``error``); statuses come from the second.
"""

from __future__ import annotations

import importlib
import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import nbformat

from . import sandbox as sb
from .submissions import Student, student_from_filename

ERROR, UNREADABLE = "error", "unreadable"
STATUSES = {"passed", "failed", "not attempted", ERROR}
#: Always forced when grading, whatever the submission says.
FORCED = {"SOLUTIONS": False, "STRICT": False}
#: Largest submission read (a lab notebook with outputs is a few MB).
MAX_SUBMISSION = 64 * 2**20

_LAB_IMPORT = re.compile(r"from\s+trnlab\.exercises\s+import\s+(lab\d\d)\b")
_CHECK_CALL = re.compile(r"^\s*(lab\d\d)\.(\w+)\.check\(", re.M)
_SOLUTIONS_ASSIGN = re.compile(r"^SOLUTIONS\s*=", re.M)


def short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ----------------------------------------------------------------------------------------------
# Reading a submission (in the grader: plain JSON, no code runs)
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Submission:
    name: str
    notebook: Any  # nbformat node, or None when unreadable
    problem: str | None


def read_submission(path: Path) -> Submission:
    try:
        if path.is_symlink() or not path.is_file():
            # (a link in an unpacked archive could point the grader at any file it can read)
            raise ValueError("not a regular file (a link or a folder); submit the notebook itself")
        if path.stat().st_size > MAX_SUBMISSION:
            raise ValueError(f"{path.stat().st_size:,} bytes, more than a lab notebook can be")
        nb = nbformat.reads(path.read_bytes().decode("utf-8"), as_version=4)
        if not isinstance(nb.get("cells"), list):
            raise ValueError("not a notebook: it has no list of cells")
    except Exception as exc:  # any unreadable file is reported, never fatal
        return Submission(path.name, None, short(f"{type(exc).__name__}: {exc}"))
    return Submission(path.name, nb, None)


def lab_of(nb) -> str:
    for cell in nb.cells:
        found = _LAB_IMPORT.search(cell.get("source", ""))
        if found:
            return found.group(1)
    return ""


def _check_order(nb) -> list[list[str]]:
    return [
        list(m.groups())
        for c in nb.cells
        if c.get("cell_type") == "code"
        for m in _CHECK_CALL.finditer(c.get("source", ""))
    ]


def _prepare(nb) -> None:
    """Make sure papermill injects the forced parameters after the learner's own.

    papermill inserts its parameters cell after the cell tagged ``parameters``; if a student
    removed the tag, the cell that sets ``SOLUTIONS`` is tagged again, so the injected
    ``SOLUTIONS = False`` still comes after it.
    """
    code = [c for c in nb.cells if c.cell_type == "code"]
    if any("parameters" in c.metadata.get("tags", []) for c in code):
        return
    for cell in code:
        if _SOLUTIONS_ASSIGN.search(cell.source):
            cell.metadata.setdefault("tags", []).append("parameters")
            return


def _own_parameters(nb) -> dict[str, Any]:
    try:
        own = nb.metadata.get("papermill", {}).get("parameters", {}) or {}
    except AttributeError:
        return {}
    if not isinstance(own, Mapping):
        return {}
    # (only names papermill can assign: the injected cell is code)
    return {
        str(k): v
        for k, v in own.items()
        if isinstance(k, str) and k.isidentifier() and k not in ("STUDENT", *FORCED)
    }


def exercises_of(lab: str) -> list[Any]:
    """The Exercise objects of ``trnlab.exercises.<lab>``, in module order ([] if unknown)."""
    from trnlab.exercises import Exercise

    try:
        module = importlib.import_module(f"trnlab.exercises.{lab}")
    except (ModuleNotFoundError, ValueError):
        return []
    return [v for v in vars(module).values() if isinstance(v, Exercise)]


def _variant_names(lab: str) -> list[str]:
    try:
        module = importlib.import_module(f"trnlab.exercises.{lab}")
    except (ModuleNotFoundError, ValueError):
        return []
    return list(getattr(module, "VARIANTS", None) or {})


# ----------------------------------------------------------------------------------------------
# One submission
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    box: sb.Sandbox
    limits: sb.Limits
    cell_timeout: float
    kernel: str
    cache: Path | None
    deadline: float | None  # time.monotonic() after which nothing new starts


def _remaining(settings: Settings) -> float:
    return math.inf if settings.deadline is None else settings.deadline - time.monotonic()


def _run_failure(outcome: sb.Outcome, wall: float, by_budget: bool) -> str:
    if outcome.timed_out:
        why = "the grading's time budget" if by_budget else "its time limit"
        return f"the notebook ran past {wall:.0f} s ({why}) and was stopped"
    tail = outcome.stderr.strip().splitlines()
    last = f": {short(tail[-1], 200)}" if tail else ""
    if outcome.truncated:
        return "the notebook's run printed more than the grader reads"
    return f"the notebook's run ended without a result (exit status {outcome.returncode}){last}"


def _parse_run(outcome: sb.Outcome) -> dict | None:
    """The runner's JSON, if it has the expected shape (it is untrusted data)."""
    data = sb.parse_json_output(outcome)
    if data is None:
        return None
    ok = (
        isinstance(data.get("answers"), str)
        and isinstance(data.get("errors"), list)
        and (data.get("failure") is None or isinstance(data.get("failure"), str))
    )
    if not ok:
        return None
    errors = []
    for e in data["errors"][:1000]:
        if not isinstance(e, dict):
            continue
        calls = e.get("calls") if isinstance(e.get("calls"), list) else []
        calls = [[str(x) for x in c[:2]] for c in calls if isinstance(c, list) and len(c) == 2]
        cell = e.get("cell") if isinstance(e.get("cell"), int) else -1
        errors.append({"cell": cell, "calls": calls, "error": short(str(e.get("error", "")))})
    return {
        "answers": data["answers"],
        "errors": errors,
        "failure": short(data["failure"]) if data.get("failure") else None,
        "truncated": bool(data.get("answers_truncated")),
    }


def _parse_check(outcome: sb.Outcome) -> dict | None:
    data = sb.parse_json_output(outcome)
    if data is None or not isinstance(data.get("rows"), list):
        return None
    rows = []
    for r in data["rows"]:
        if not (isinstance(r, dict) and r.get("status") in STATUSES):
            return None
        rows.append(
            {
                "exercise": str(r.get("exercise", "")),
                "status": r["status"],
                "message": str(r.get("message", "")),
            }
        )
    return {
        "rows": rows,
        "other_errors": [str(x) for x in data.get("other_errors") or []],
        "installed": bool(data.get("capture_installed")),
        "problem": data.get("problem") if isinstance(data.get("problem"), str) else None,
    }


def run_notebook(nb, parameters: dict, settings: Settings) -> dict:
    """Step 1: the notebook run in its sandbox; its answers, failing cells and failure."""
    remaining = _remaining(settings)
    wall = min(settings.limits.wall_s, remaining)
    request = {
        "notebook": nb,
        "parameters": parameters,
        "kernel": settings.kernel,
        "cell_timeout": settings.cell_timeout,
        # the runner stops the notebook itself a little before the sandbox is killed, so the
        # answers recorded so far are still handed back
        "stop_after": max(1.0, wall - max(5.0, 0.05 * wall)),
        "isolated": settings.box.isolated,
    }
    outcome = settings.box.run(
        ["-m", "trnlab.course._run_notebook"],
        json.dumps(request).encode(),
        replace(settings.limits, wall_s=wall),
        cache_template=settings.cache,
    )
    run = _parse_run(outcome)
    if run is None:
        failure = _run_failure(outcome, wall, wall < settings.limits.wall_s)
        run = {"answers": "", "errors": [], "failure": failure, "truncated": False}
    return run


def check_answers(nb, lab: str, variant: dict, run: dict, settings: Settings) -> dict | None:
    """Step 2: the recorded answers checked in a clean sandbox (None if that failed)."""
    request = {
        "lab": lab,
        "variant": variant,
        "answers": run["answers"],
        "errors": run["errors"],
        "order": _check_order(nb),
    }
    wall = min(settings.limits.wall_s, max(_remaining(settings), 30.0))
    outcome = settings.box.run(
        ["-m", "trnlab.course._check_answers"],
        json.dumps(request).encode(),
        replace(settings.limits, wall_s=wall),
        cache_template=settings.cache,
    )
    return _parse_check(outcome)


def grade_one(
    sub: Submission,
    student: Student | None,
    expected_lab: str | None,
    settings: Settings,
) -> list[dict[str, str]]:
    """The CSV rows of one submission (never raises for a bad one)."""
    name = student.name if student is not None else student_from_filename(sub.name)
    row = {"file": sub.name, "student": name, "lab": "", "exercise": ""}
    if sub.notebook is None:
        return [{**row, "status": UNREADABLE, "message": sub.problem or "unreadable"}]
    nb = sub.notebook
    declared = lab_of(nb)
    lab = row["lab"] = expected_lab or declared
    if not lab or not exercises_of(lab):
        why = f"there are no exercises for {lab}" if lab else "it imports no lab's exercises"
        return [{**row, "status": ERROR, "message": f"not a trnlab lab notebook: {why}"}]
    if _remaining(settings) < 1:
        message = "not graded: the grading's time budget ran out"
        return [{**row, "status": ERROR, "message": message}]

    own = _own_parameters(nb)
    if student is not None and student.variant:
        variant = dict(student.variant)
    else:  # no manifest: the variant the notebook was given (any value the lab allows)
        variant = {k: own[k] for k in _variant_names(lab) if k in own}
    _prepare(nb)
    run = run_notebook(nb, {**own, **variant, "STUDENT": name, **FORCED}, settings)
    checked = check_answers(nb, lab, variant, run, settings)

    notes = [run["failure"]] if run["failure"] else []
    if checked is None:
        message = "the grader's checking process failed; grade this notebook again"
        rows = [
            {**row, "exercise": e.key, "status": ERROR, "message": message}
            for e in exercises_of(lab)
        ]
    elif checked["problem"] and not checked["rows"]:
        return [{**row, "status": ERROR, "message": short(checked["problem"])}]
    else:
        rows = [{**row, **r} for r in checked["rows"]]
        if not notes and checked["other_errors"]:
            notes.append("; ".join(checked["other_errors"]))
        elif not notes and not checked["installed"]:
            notes.append(
                "the notebook ran, but the grader's record of its answers is missing (it was "
                "removed or replaced during the run)"
            )
        if checked["problem"]:
            notes.append(checked["problem"])
    if expected_lab and declared and declared != expected_lab:
        notes.append(f"this notebook is {declared}'s, but {expected_lab} is being graded")
    if run["truncated"]:
        notes.append("the answers recorded by the run were more than the grader reads")
    if notes:
        rows.append({**row, "status": ERROR, "message": "; ".join(notes)})
    return rows
