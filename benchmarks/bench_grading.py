"""Grading throughput: notebooks per minute through ``python -m trnlab.course grade``, each
notebook run in its own sandbox and its answers checked in a second, clean one.

A class of lab 01 submissions (the fastest lab; a third right, a third wrong, a third
untouched) at the lab's small test parameters, and a pair of lab 05 submissions (kernels:
the slowest checks), graded with as many notebooks at a time as there are cores, and one at a
time for the speed-up. The reference: one of the same notebooks run by papermill directly
(no sandbox, no checker). Also the sandbox's own cost: a trivial command confined, and the
self-test that warms the checker. Without bubblewrap, the figures say so and are empty.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from tests.grading_helpers import RIGHT, TILED_KERNEL, WRONG, lab05_submission, submission
from trnlab.course import grading
from trnlab.course import sandbox as sb

CLASS_SIZE = 12


def _class(folder: Path) -> None:
    answers = [RIGHT, WRONG, None]
    for i in range(CLASS_SIZE):
        student = f"s{i:02d}"
        submission(folder / f"01_trainium_family__{student}.ipynb", student, answers[i % 3])


def _lab05(folder: Path) -> None:
    for student in ("k0", "k1"):
        lab05_submission(folder / f"05_write_a_kernel__{student}.ipynb", student, TILED_KERNEL)


def _grade(folder: Path, lab: str, jobs: int, lines: list[str]) -> tuple[float, int, int]:
    """Seconds, notebooks graded, and notebooks with a submission-level error (should be 0)."""
    t0 = time.perf_counter()
    rows = grading.grade(
        folder, folder.parent / f"{folder.name}-{jobs}.csv", lab=lab, jobs=jobs, log=lines.append
    )
    seconds = time.perf_counter() - t0
    failed = len({r["file"] for r in rows if r["exercise"] == ""})
    return seconds, len({r["file"] for r in rows}), failed


def _plain(notebook: Path, out: Path) -> float:
    """The same notebook run by papermill directly: no sandbox, no checker (the reference)."""
    import papermill as pm

    t0 = time.perf_counter()
    pm.execute_notebook(
        str(notebook), str(out), kernel_name="trnlab", progress_bar=False, store_widget_state=False
    )
    return time.perf_counter() - t0


def run() -> dict:
    try:
        box = sb.open_sandbox()
    except sb.SandboxUnavailable as err:
        return {"skipped": str(err)}
    cores = len(os.sched_getaffinity(0))
    figures: dict = {"cores": cores, "sandbox": box.describe()}
    t0 = time.perf_counter()
    for _ in range(10):
        box.run(["-c", "pass"], b"", sb.Limits(wall_s=60))
    figures["sandbox_start_s"] = round((time.perf_counter() - t0) / 10, 3)
    with tempfile.TemporaryDirectory() as tmp:
        lab01 = Path(tmp) / "lab01"
        lab01.mkdir()
        _class(lab01)
        first = sorted(lab01.glob("*.ipynb"))[0]
        plain = min(_plain(first, Path(tmp) / "plain.ipynb") for _ in range(2))
        figures["lab01_plain_papermill_s"] = round(plain, 2)
        lab05 = Path(tmp) / "lab05"
        lab05.mkdir()
        _lab05(lab05)
        for jobs in sorted({1, cores}):
            lines: list[str] = []
            seconds, n, failed = _grade(lab01, "01", jobs, lines)
            key = "parallel" if jobs == cores and jobs > 1 else "serial"
            figures[f"lab01_{key}_notebooks_with_errors"] = failed
            figures[f"lab01_{key}_s"] = round(seconds, 1)
            figures[f"lab01_{key}_notebooks_per_min"] = round(60 * n / seconds, 1)
            selftest = [ln for ln in lines if ln.startswith("self-test")]
            figures["lab01_selftest_line"] = selftest[0] if selftest else ""
        per_notebook = figures["lab01_serial_s"] / CLASS_SIZE
        figures["lab01_serial_s_per_notebook"] = round(per_notebook, 2)
        # sandboxed run + clean check, against the bare papermill run of the same notebook
        figures["lab01_grading_over_plain_run"] = round(per_notebook / plain, 2)
        if "lab01_serial_s" in figures and "lab01_parallel_s" in figures:
            figures["lab01_speedup"] = round(
                figures["lab01_serial_s"] / figures["lab01_parallel_s"], 2
            )
        seconds, n, failed = _grade(lab05, "05", cores, [])
        figures["lab05_notebooks_with_errors"] = failed
        figures["lab05_s"] = round(seconds, 1)
        figures["lab05_notebooks_per_min"] = round(60 * n / seconds, 1)
    figures["class_size"] = CLASS_SIZE
    return figures
