"""Grade a folder of submitted lab notebooks in a sandbox: one CSV row per exercise.

    python -m trnlab.course grade submissions/ --csv grades.csv --lab 01
    python -m trnlab.course grade submissions/ --csv grades.csv --manifest variants/manifest.json

Every argument is checked before any notebook runs (the folder, the CSV's folder is writable,
limits are positive, the roster or manifest has the right shape, the kernel, the sandbox).
Then every ``*.ipynb`` in the folder is read into memory, and each one is graded in two
sandboxed steps (:mod:`trnlab.course.sandbox`), several notebooks at a time:

1. **run**: the notebook is executed top to bottom with papermill, in a fresh empty folder,
   with its own parameters but ``SOLUTIONS = False`` and ``STRICT = False``, the student's
   variant (from the manifest when given) and ``STUDENT`` from the file name; each
   ``Exercise.check(answer)`` it makes also records the answer as plain data
   (:mod:`trnlab.course.answers`). Nothing the notebook displays is read as a result.
2. **check**: a clean process (a new sandbox; no student code runs there) rebuilds the lab's
   exercises for that variant and checks each recorded answer with the real checks; a lab 05
   kernel is replayed from the calls it made.

The CSV (written atomically, rows sorted by file) has the columns::

    file, student, lab, exercise, status, message

``status`` is an exercise's ``passed`` / ``failed`` / ``not attempted``, or ``error`` when its
check cell raised; a submission-level problem is a row with an empty exercise: ``unreadable``
(not a notebook) or ``error`` (a cell outside the exercises raised, the run was stopped at a
limit or the time budget, the file matches no student of the roster, ...). Grading never stops
at a bad submission. See ``docs/instructors.md``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import sandbox as sb
from ._grading_steps import (
    ERROR,
    UNREADABLE,
    Settings,
    Submission,
    exercises_of,
    grade_one,
    lab_of,
    read_submission,
    short,
)
from .submissions import (
    Roster,
    RosterError,
    lab_name,
    read_manifest,
    read_roster,
)

__all__ = ["COLUMNS", "ERROR", "UNREADABLE", "GradingError", "grade"]

COLUMNS = ["file", "student", "lab", "exercise", "status", "message"]
KERNEL = "trnlab"


class GradingError(ValueError):
    """The grading cannot start: a bad argument, no sandbox, or a failed self-test."""


# ----------------------------------------------------------------------------------------------
# The folder
# ----------------------------------------------------------------------------------------------
def _positive(name: str, value: float | None, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise GradingError(f"{name} must be a number of seconds, not {value!r}")
    if value <= 0:
        raise GradingError(f"{name} must be more than 0 seconds, not {value:g}")
    return float(value)


def _check_csv(csv_path: Path, folder: Path) -> None:
    """Fail now, not after grading, if the CSV cannot be written."""
    if csv_path.is_dir():
        raise GradingError(f"--csv {csv_path} is a folder; give a file name (grades.csv)")
    if csv_path.suffix.lower() == ".ipynb":
        raise GradingError(f"--csv {csv_path} would be read as a submission; name it .csv")
    parent = csv_path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".trnlab-grades-", delete=True):
            pass
    except OSError as err:
        raise GradingError(f"cannot write the CSV in {parent}: {err}") from None


def _write_csv(csv_path: Path, rows: list[dict[str, str]]) -> None:
    """Write the CSV atomically: a temporary file beside it, then a rename."""
    fd, tmp = tempfile.mkstemp(dir=csv_path.parent, prefix=".trnlab-grades-", suffix=".csv")
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, csv_path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _check_kernel(kernel: str) -> None:
    """The kernel must exist and live where the sandbox can see it."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(kernel)
    except NoSuchKernel:
        raise GradingError(
            f"no Jupyter kernel {kernel!r}: make env installs the course's 'trnlab' kernel"
        ) from None
    inside = (sys.prefix, sys.base_prefix)
    where = os.path.realpath(spec.resource_dir)
    if not any(where.startswith(os.path.realpath(p) + os.sep) for p in inside):
        raise GradingError(
            f"kernel {kernel!r} is installed in {spec.resource_dir}, outside this environment, "
            "where the sandbox cannot see it; install it into the environment "
            "(python -m ipykernel install --sys-prefix --name ...)"
        )


def _roster(manifest, roster) -> Roster | None:
    if manifest is not None and roster is not None:
        raise GradingError("give --manifest or --roster, not both (a manifest is a roster)")
    try:
        if manifest is not None:
            return read_manifest(manifest)
        if roster is not None:
            return read_roster(roster)
    except RosterError as err:
        raise GradingError(str(err)) from None
    return None


class _Progress:
    """Per-notebook lines through ``log``, and a bar on stderr when it is a terminal."""

    def __init__(self, total: int, log: Callable[[str], Any] | None, bar: bool) -> None:
        self.total, self.done, self.log, self.bar = total, 0, log, bar
        self.t0 = time.monotonic()
        self.lock = threading.Lock()

    def step(self, name: str, rows: list[dict[str, str]], seconds: float) -> None:
        with self.lock:
            self.done += 1
            counts: dict[str, int] = {}
            for r in rows:
                counts[r["status"]] = counts.get(r["status"], 0) + 1
            summary = ", ".join(f"{n} {s}" for s, n in counts.items())
            if self.bar:
                sys.stderr.write("\r\033[K")
            if self.log is not None:
                self.log(f"[{self.done}/{self.total}] {name}: {summary} ({seconds:.1f} s)")
            if self.bar:
                width = 30
                full = width * self.done // max(self.total, 1)
                elapsed = time.monotonic() - self.t0
                left = elapsed / self.done * (self.total - self.done)
                sys.stderr.write(
                    f"[{'#' * full}{'.' * (width - full)}] {self.done}/{self.total} notebooks, "
                    f"{elapsed:.0f} s, about {left:.0f} s left"
                )
                sys.stderr.flush()

    def close(self) -> None:
        if self.bar:
            sys.stderr.write("\n")


def _selftest(
    box: sb.Sandbox, labs: list[str], limits: sb.Limits, cache: Path, say: Callable[[str], Any]
) -> None:
    """Check every lab's reference answers through the sandboxed checker (warming its cache)."""
    for lab in labs:
        t0 = time.monotonic()
        outcome = box.run(
            ["-m", "trnlab.course._check_answers"],
            json.dumps({"selftest": lab}).encode(),
            limits,
            cache_template=cache,
            writable_cache=True,
        )
        data = sb.parse_json_output(outcome)
        if data is not None and not data.get("checked"):
            data = {"failures": ["no reference answer was checked"]}
        if data is None or data.get("failures"):
            why = (
                "; ".join(data["failures"])
                if data
                else short(outcome.stderr[-2000:] or "no output")
            )
            raise GradingError(
                f"the grader's self-test failed for {lab} (its reference answers do not pass "
                f"through the sandboxed checker), so nothing was graded: {why}"
            )
        say(
            f"self-test {lab}: its {data['checked']} reference answers pass the checker "
            f"({time.monotonic() - t0:.1f} s)"
        )


def grade(
    folder: str | Path,
    csv_path: str | Path,
    timeout: float = 300,
    *,
    kernel_name: str = KERNEL,
    manifest: str | Path | None = None,
    roster: str | Path | None = None,
    lab: str | None = None,
    jobs: int | None = None,
    notebook_timeout: float = 900,
    budget: float | None = None,
    limits: sb.Limits | None = None,
    unsafe_no_sandbox: bool = False,
    log: Callable[[str], Any] | None = print,
    progress_bar: bool | None = None,
) -> list[dict[str, str]]:
    """Grade every ``*.ipynb`` in ``folder`` (see the module docstring) and write the CSV.

    Parameters
    ----------
    folder : path
        The submissions (not searched recursively). They are read into memory before any
        runs, so nothing a submission does can change another.
    csv_path : path
        The CSV to write (columns :data:`COLUMNS`), atomically, once everything is graded.
    timeout : float
        Seconds any one cell may run.
    kernel_name : str
        The Jupyter kernel (installed in this environment) to run the notebooks with.
    manifest : path, optional
        ``manifest.json`` (or ``.csv``) from ``python -m trnlab.course variants``: the
        students, the file each was given, and their variants, which are graded whatever
        the notebook says. Bad entries are reported and skipped.
    roster : path, optional
        A roster (one student per line) to match file names against, when there are no
        variants. Bad lines are reported and skipped.
    lab : str, optional
        The lab being graded (``lab01``, ``01`` or the notebook's name); without it (or a
        manifest) each notebook's own import says which lab it is.
    jobs : int, optional
        Notebooks graded at once (default: the number of cores).
    notebook_timeout : float
        Seconds one notebook may run in all (its sandbox is then killed).
    budget : float, optional
        Seconds for the whole grading; notebooks not started by then get an error row.
    limits : Limits, optional
        The sandbox's other limits (memory, processes, CPU, files); ``wall_s`` is set from
        ``notebook_timeout``.
    unsafe_no_sandbox : bool
        Run without a sandbox (the students' code gets your rights); only where bubblewrap
        cannot run and you trust the submissions.
    log : callable, optional
        Receives one line per graded notebook, and reported problems (``None``: silence).
    progress_bar : bool, optional
        Draw a progress bar on stderr (default: when stderr is a terminal).

    Returns
    -------
    list of dict
        The rows written.

    Raises
    ------
    GradingError
        Before any notebook runs, for a bad argument, a missing sandbox or a failed self-test.
    """
    t0 = time.monotonic()
    folder = Path(folder)
    if not folder.is_dir():
        raise GradingError(f"no folder {folder}: pass the folder of submitted notebooks")
    csv_path = Path(csv_path)
    timeout = _positive("--timeout", timeout)
    notebook_timeout = _positive("--notebook-timeout", notebook_timeout)
    budget = _positive("--budget", budget, allow_none=True)
    if jobs is None:
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise GradingError(f"--jobs must be a whole number of at least 1, not {jobs!r}")
    _check_csv(csv_path, folder)
    people = _roster(manifest, roster)
    try:
        expected = lab_name(lab) if lab is not None else None
    except ValueError as err:
        raise GradingError(str(err)) from None
    if people is not None and people.lab is not None:
        if expected is not None and expected != people.lab:
            raise GradingError(f"--lab {lab} disagrees with the manifest's lab ({people.lab})")
        expected = people.lab
    if expected is not None and not exercises_of(expected):
        raise GradingError(f"there are no exercises for {expected}")
    _check_kernel(kernel_name)
    limits = replace(limits or sb.Limits(cpu_s=2 * notebook_timeout), wall_s=notebook_timeout)
    try:
        box = sb.open_sandbox(unsafe=unsafe_no_sandbox, hide=[folder, csv_path])
    except sb.SandboxUnavailable as err:
        raise GradingError(str(err)) from None
    say = log or (lambda _: None)
    if people is not None:
        for p in people.problems:
            say(f"{Path(people.source).name}: {p} (skipped)")
    if not box.isolated:
        say(
            "WARNING: grading without a sandbox (--unsafe-no-sandbox): the notebooks run with your rights"
        )

    # Every submission read now, before any code runs.
    subs = [read_submission(p) for p in sorted(folder.glob("*.ipynb"))]
    labs = {expected} if expected else {lab_of(s.notebook) for s in subs if s.notebook is not None}
    labs = sorted(x for x in labs if x and exercises_of(x))

    with tempfile.TemporaryDirectory(prefix="trnlab-grading-") as private:
        cache = Path(private) / "numba"
        cache.mkdir()
        cache.chmod(0o777)  # the self-test's sandbox user writes the compiled functions here
        say(f"sandbox: {box.describe()}; {len(subs)} notebooks, {jobs} at a time")
        _selftest(box, labs, replace(limits, wall_s=min(notebook_timeout, 900)), cache, say)
        deadline = None if budget is None else t0 + budget
        settings = Settings(box, limits, timeout, kernel_name, cache, deadline)
        bar = sys.stderr.isatty() if progress_bar is None else progress_bar
        progress = _Progress(len(subs), log, bar)
        results: dict[str, list[dict[str, str]]] = {}
        matched: set[str] = set()

        def task(sub: Submission) -> list[dict[str, str]]:
            start = time.monotonic()
            student = people.match(sub.name) if people is not None else None
            if people is not None and student is None:
                rows = [
                    {
                        "file": sub.name,
                        "student": "",
                        "lab": expected or "",
                        "exercise": "",
                        "status": ERROR,
                        "message": f"not graded: {sub.name} matches no student of "
                        f"{Path(people.source).name} (name it <lab>__<student>.ipynb as the "
                        "variants tool did, or <student>.ipynb)",
                    }
                ]
            else:
                if student is not None:
                    matched.add(student.name)
                rows = grade_one(sub, student, expected, settings)
            progress.step(sub.name, rows, time.monotonic() - start)
            return rows

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(task, s): s.name for s in subs}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
        progress.close()
    rows = [r for s in subs for r in results[s.name]]
    _write_csv(csv_path, rows)
    if people is not None:
        missing = [s.name for s in people.students if s.name not in matched]
        if missing:
            say(f"no submission from {len(missing)} of the roster: {', '.join(missing)}")
    return rows


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, not {text}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trnlab.course grade",
        description="Grade every submitted notebook in a folder, each in its own sandbox "
        "(solutions off; answers checked by a clean process), and write a CSV with one row "
        "per exercise.",
    )
    parser.add_argument("folder", help="folder of submitted .ipynb files")
    parser.add_argument("--csv", default="grades.csv", help="CSV to write (default grades.csv)")
    parser.add_argument("--lab", help="the lab being graded: lab01, 01 or its notebook")
    who = parser.add_mutually_exclusive_group()
    who.add_argument(
        "--manifest",
        help="manifest.json (or .csv) from the variants command: students, their files and "
        "their assigned variants",
    )
    who.add_argument("--roster", help="roster (one student per line) to match file names to")
    parser.add_argument("--timeout", type=_seconds, default=300, help="seconds per cell (300)")
    parser.add_argument(
        "--notebook-timeout", type=_seconds, default=900, help="seconds per notebook (900)"
    )
    parser.add_argument("--budget", type=_seconds, help="seconds for the whole grading")
    parser.add_argument("--jobs", type=_count, help="notebooks at once (default: cores)")
    parser.add_argument(
        "--memory-gib", type=float, default=4.0, help="address space per process, GiB (4)"
    )
    parser.add_argument(
        "--processes", type=_count, default=256, help="processes and threads per notebook (256)"
    )
    parser.add_argument("--kernel", default=KERNEL, help="Jupyter kernel (default trnlab)")
    parser.add_argument(
        "--unsafe-no-sandbox",
        action="store_true",
        help="run the notebooks without a sandbox, with your rights (only where bubblewrap "
        "cannot run and you trust every submission)",
    )
    args = parser.parse_args(argv)
    if not (math.isfinite(args.memory_gib) and args.memory_gib > 0):
        parser.error(f"--memory-gib must be more than 0, not {args.memory_gib}")
    try:
        limits = sb.Limits(
            cpu_s=2 * args.notebook_timeout,
            memory_bytes=int(args.memory_gib * 2**30),
            processes=args.processes,
        )
        rows = grade(
            args.folder,
            args.csv,
            timeout=args.timeout,
            kernel_name=args.kernel,
            manifest=args.manifest,
            roster=args.roster,
            lab=args.lab,
            jobs=args.jobs,
            notebook_timeout=args.notebook_timeout,
            budget=args.budget,
            limits=limits,
            unsafe_no_sandbox=args.unsafe_no_sandbox,
        )
    except (GradingError, ValueError) as err:
        print(f"grade: {err}", file=sys.stderr)
        return 2
    files = len({r["file"] for r in rows})
    print(f"{len(rows)} rows for {files} notebooks in {args.csv}")
    return 0
