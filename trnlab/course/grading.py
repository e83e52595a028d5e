"""Grade a folder of submitted lab notebooks: run each one, write one CSV row per exercise.

Every ``*.ipynb`` in the folder is read, re-executed with papermill in a temporary folder
(with the submission's own parameters, so each student's variant is kept, but always with
``SOLUTIONS = False`` and ``STRICT = False``: a student cannot switch the reference answers on),
and the results the lab publishes (:func:`trnlab.exercises.publish`) are written to a CSV:

    file, student, lab, exercise, status, message

``status`` is an exercise's ``passed`` / ``failed`` / ``not attempted``, or ``error`` when its
check cell raised; a submission that cannot be graded gets one row with an empty exercise:
``unreadable`` (not a notebook, e.g. truncated JSON) or ``error`` (a cell outside the exercises
raised, the kernel died, a cell timed out, or nothing was published). Grading never stops at a
bad submission.

    python -m trnlab.course grade submissions/ --csv grades.csv

Grading runs the students' code. Run it in a sandbox (a container without network or
credentials, as a user who can write only the output folder).
"""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import nbformat

__all__ = ["COLUMNS", "ERROR", "UNREADABLE", "grade", "grade_notebook"]

COLUMNS = ["file", "student", "lab", "exercise", "status", "message"]
ERROR, UNREADABLE = "error", "unreadable"
KERNEL = "trnlab"
#: Always forced when grading, whatever the submission says.
FORCED = {"SOLUTIONS": False, "STRICT": False}

_LAB_IMPORT = re.compile(r"from\s+trnlab\.exercises\s+import\s+(lab\d\d)\b")
_CHECK_CALL = re.compile(r"^\s*(lab\d\d)\.(\w+)\.check\(", re.M)
_SOLUTIONS_ASSIGN = re.compile(r"^SOLUTIONS\s*=", re.M)


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _exercises_of(lab: str) -> list[Any]:
    """The Exercise objects of ``trnlab.exercises.<lab>``, in module order ([] if unknown)."""
    from trnlab.exercises import Exercise

    try:
        module = importlib.import_module(f"trnlab.exercises.{lab}")
    except (ModuleNotFoundError, ValueError):
        return []
    return [v for v in vars(module).values() if isinstance(v, Exercise)]


def _exercise_key(lab: str, attribute: str) -> str | None:
    try:
        module = importlib.import_module(f"trnlab.exercises.{lab}")
    except ModuleNotFoundError:
        return None
    return getattr(getattr(module, attribute, None), "key", None)


def _lab_of(nb: nbformat.NotebookNode) -> str:
    for cell in nb.cells:
        found = _LAB_IMPORT.search(cell.get("source", ""))
        if found:
            return found.group(1)
    return ""


def _prepare(nb: nbformat.NotebookNode) -> None:
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


def _cell_errors(nb: nbformat.NotebookNode) -> list[tuple[int, str, str]]:
    """(cell index, source, "Name: value") of every cell that raised."""
    found = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                found.append((i, cell.source, _short(f"{out.ename}: {out.evalue}")))
                break
    return found


def grade_notebook(
    path: str | Path,
    *,
    timeout: float = 300,
    kernel_name: str = KERNEL,
    parameters: Mapping[str, Any] | None = None,
) -> list[dict[str, str]]:
    """The CSV rows of one submission (see the module docstring); never raises for a bad one.

    Parameters
    ----------
    path : path
        The submitted notebook.
    timeout : float
        Seconds any one cell may run before it counts as an error.
    kernel_name : str
        The Jupyter kernel to run it with (the course's ``trnlab`` kernel).
    parameters : mapping, optional
        Parameters to use instead of the ones recorded in the notebook (from a variants
        manifest); ``SOLUTIONS`` and ``STRICT`` are forced off either way.
    """
    import papermill as pm

    from trnlab.exercises import read_published

    path = Path(path)
    row = {"file": path.name, "student": path.stem, "lab": "", "exercise": ""}
    try:
        nb = nbformat.read(path, as_version=4)
        if not isinstance(nb.get("cells"), list):
            raise ValueError("not a notebook: it has no list of cells")
    except Exception as exc:  # any unreadable file is reported, never fatal
        return [{**row, "status": UNREADABLE, "message": _short(f"{type(exc).__name__}: {exc}")}]

    own = dict(nb.metadata.get("papermill", {}).get("parameters", {}) or {})
    params = {**own, **(parameters or {}), **FORCED}
    row["student"] = str(params.get("STUDENT") or path.stem)
    row["lab"] = _lab_of(nb)
    _prepare(nb)

    failure = None
    with tempfile.TemporaryDirectory(prefix="trnlab-grade-") as tmp:
        source, executed = Path(tmp) / "submission.ipynb", Path(tmp) / "executed.ipynb"
        nbformat.write(nb, source)
        try:
            pm.execute_notebook(
                str(source),
                str(executed),
                parameters=params,
                kernel_name=kernel_name,
                cwd=tmp,
                execution_timeout=timeout,
                progress_bar=False,
                store_widget_state=False,
                allow_errors=True,  # go on past a broken answer cell: the others still count
            )
        except pm.PapermillExecutionError:
            pass  # a cell raised: read below which one, from the executed notebook
        except Exception as exc:  # timeout, dead kernel, ...: an error row, never fatal
            failure = _short(f"{type(exc).__name__}: {exc}")
        try:
            out = nbformat.read(executed, as_version=4)
        except Exception:
            out = None
    bundle = None
    errors = _cell_errors(out) if out is not None else []
    if out is not None:
        try:
            bundle = read_published(out)
        except LookupError:
            bundle = None
    if bundle is not None:
        row["lab"] = bundle.get("lab", row["lab"])

    # Errors in exercise cells belong to that exercise; any other is the submission's.
    by_exercise: dict[str, str] = {}
    other = []
    for index, src, text in errors:
        call = _CHECK_CALL.search(src)
        key = _exercise_key(*call.groups()) if call else None
        if key is not None:
            by_exercise.setdefault(key, text)
        else:
            other.append(f"cell {index}: {text}")

    rows = []
    if bundle is not None:
        statuses = bundle.get("exercises", {})
        messages = bundle.get("messages", {})
        # In the order of the notebook's check cells, then any others the lab has.
        keys = [
            _exercise_key(*m.groups()) for c in out.cells for m in _CHECK_CALL.finditer(c.source)
        ]
        keys += list(statuses) + [e.key for e in _exercises_of(row["lab"])] + list(by_exercise)
        keys = list(dict.fromkeys(k for k in keys if k is not None))
        for key in keys:
            if key in by_exercise:
                status, message = ERROR, f"the check cell raised {by_exercise[key]}"
            elif key in statuses:
                status, message = statuses[key], messages.get(key, "")
            else:
                status, message = "not attempted", "its check cell did not run"
            rows.append({**row, "exercise": key, "status": status, "message": message})
    if failure is not None:
        rows.append({**row, "status": ERROR, "message": failure})
    elif other:
        rows.append({**row, "status": ERROR, "message": "; ".join(other)})
    elif bundle is None:
        rows.append(
            {
                **row,
                "status": ERROR,
                "message": "the notebook published no results: its last cell "
                "(exercises.publish) is missing or did not run",
            }
        )
    return rows


def _manifest_parameters(manifest: str | Path | Mapping | None) -> dict[str, dict[str, Any]]:
    """student -> parameters, from a ``python -m trnlab.course variants`` manifest."""
    if manifest is None:
        return {}
    data = manifest if isinstance(manifest, Mapping) else json.loads(Path(manifest).read_text())
    students = data.get("students", data)
    return {
        str(s): {k: v for k, v in p.items() if k not in ("student", "file")} | {"STUDENT": s}
        for s, p in students.items()
    }


def grade(
    folder: str | Path,
    csv_path: str | Path,
    timeout: float = 300,
    *,
    kernel_name: str = KERNEL,
    manifest: str | Path | Mapping | None = None,
    log: Callable[[str], Any] | None = print,
) -> list[dict[str, str]]:
    """Grade every ``*.ipynb`` in ``folder`` and write the rows to ``csv_path``.

    Parameters
    ----------
    folder : path
        The submissions (not searched recursively).
    csv_path : path
        The CSV to write (columns :data:`COLUMNS`).
    timeout : float
        Seconds any one cell may run.
    kernel_name : str
        The Jupyter kernel to run the notebooks with.
    manifest : path or mapping, optional
        The ``manifest.json`` written by ``python -m trnlab.course variants``: each student's
        parameters are taken from it (by the notebook's ``STUDENT`` parameter) rather than
        from the notebook, so an edited variant is graded as assigned.
    log : callable, optional
        Receives one progress line per file (``None`` for silence).

    Returns
    -------
    list of dict
        The rows written.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"no folder {folder}: pass the folder of submitted notebooks")
    paths = sorted(folder.glob("*.ipynb"))
    assigned = _manifest_parameters(manifest)
    rows: list[dict[str, str]] = []
    for i, path in enumerate(paths, 1):
        t0 = time.perf_counter()
        params = None
        if assigned:
            try:
                student = nbformat.read(path, as_version=4).metadata.papermill.parameters.STUDENT
                params = assigned.get(str(student))
            except Exception:
                params = None
        found = grade_notebook(path, timeout=timeout, kernel_name=kernel_name, parameters=params)
        rows += found
        if log is not None:
            counts: dict[str, int] = {}
            for r in found:
                counts[r["status"]] = counts.get(r["status"], 0) + 1
            summary = ", ".join(f"{n} {s}" for s, n in counts.items())
            log(f"[{i}/{len(paths)}] {path.name}: {summary} ({time.perf_counter() - t0:.1f} s)")
    csv_path = Path(csv_path)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return rows


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trnlab.course grade",
        description="Run every submitted notebook in a folder (solutions off) and write a CSV "
        "with one row per exercise. This executes the students' code: use a sandbox.",
    )
    parser.add_argument("folder", help="folder of submitted .ipynb files")
    parser.add_argument("--csv", default="grades.csv", help="CSV to write (default grades.csv)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per cell (300)")
    parser.add_argument("--kernel", default=KERNEL, help="Jupyter kernel (default trnlab)")
    parser.add_argument(
        "--manifest",
        help="manifest.json from the variants command: grade each student's "
        "assigned variant, whatever their notebook says",
    )
    args = parser.parse_args(argv)
    try:
        rows = grade(
            args.folder,
            args.csv,
            timeout=args.timeout,
            kernel_name=args.kernel,
            manifest=args.manifest,
        )
    except (FileNotFoundError, ValueError) as err:
        print(f"grade: {err}", file=sys.stderr)
        return 2
    files = len({r["file"] for r in rows})
    print(f"{len(rows)} rows for {files} notebooks in {args.csv}")
    return 0
