"""Submissions for the grading tests: copies of a learner lab as the variants tool hands them
out (parameters injected), with answer lines filled in and extra cells added.

Answers for lab 01 are worked out here from the published figures, not by the exercises.
"""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path

import nbformat
import papermill as pm
import pytest

from tests.browser.waiting import load_factor
from tests.lab_checks import lab01 as lab01_checks

ROOT = Path(__file__).resolve().parents[1]
LAB01 = ROOT / "labs" / "01_trainium_family.ipynb"
LAB04 = ROOT / "labs" / "04_write_a_kernel.ipynb"

RIGHT = {
    # Trainium2: 667 dense BF16 TFLOPS / (8 cores x 128 x 128 PEs x 2 FLOP per MAC), in GHz.
    "clock_ghz": 667e12 / (8 * 128 * 128 * 2) / 1e9,
    # Trainium3 MXFP8 (2,517 TFLOPS) over Trainium cFP8 (at its BF16 rate, 190 TFLOPS).
    "growth": 2517e12 / 190e12,
    # trn1.32xlarge: 9.8 TB/s printed for 16 chips.
    "per_chip_gbs": 9.8e12 / 16 / 1e9,
    "trust": "'docs'",
}
WRONG = {
    "clock_ghz": 2.4,  # the documented clock, not the one the rating implies
    "growth": 8.0,
    "per_chip_gbs": 820,  # the chip documentation's figure, not the instance's
    "trust": "'glossary'",
}


def load_scaled(seconds: float, cap: float = 6.0) -> int:
    """A time limit for a notebook run under this machine's load: ``seconds`` on an idle
    machine, stretched by the load factor the browser tests' waits use (run queue per core, a
    contention probe; ``tests/browser/waiting.py``), up to ``cap`` times, so an honest notebook
    never trips a limit only because other work shares the cores."""
    return round(seconds * min(cap, load_factor()))


KEYS = ["lab01.clock", "lab01.growth", "lab01.bandwidth", "lab01.trust"]
#: A learner's first tiled matmul for lab 04 (``my_tiled``), as a cell would hold it.
TILED_KERNEL = """
def my_tiled(ctx, a_t, b, c):
    (K, M), N = a_t.shape, b.shape[1]
    a_tile = ctx.sbuf((128, 128), a_t.fmt, "a tile")
    b_tile = ctx.sbuf((128, 512), b.fmt, "b tile")
    acc = ctx.psum((128, 512), "acc")
    out = ctx.sbuf((128, 512), c.fmt, "c tile")
    for m0 in range(0, M, 128):
        ms = min(128, M - m0)
        for n0 in range(0, N, 512):
            ns = min(512, N - n0)
            for k0 in range(0, K, 128):
                ks = min(128, K - k0)
                ctx.load(a_tile[:ks, :ms], a_t[k0 : k0 + ks, m0 : m0 + ms])
                ctx.load(b_tile[:ks, :ns], b[k0 : k0 + ks, n0 : n0 + ns])
                ctx.matmul(acc[:ms, :ns], a_tile[:ks, :ms], b_tile[:ks, :ns], accumulate=k0 > 0)
            ctx.copy(out[:ms, :ns], acc[:ms, :ns])
            ctx.store(c[m0 : m0 + ms, n0 : n0 + ns], out[:ms, :ns])
"""


def submission(
    path: Path,
    student: str,
    answers: dict | None = None,
    *,
    lab: Path = LAB01,
    parameters: dict | None = None,
    extra: str | None = None,
    after: str = "lab01.setup(",
) -> Path:
    """A learner lab prepared for ``student`` with ``answers`` (variable -> source text) put
    in place of the ``variable = None`` lines, and an ``extra`` code cell inserted after the
    first cell containing ``after``."""
    params = lab01_checks.PARAMS if parameters is None else parameters
    pm.execute_notebook(
        str(lab),
        str(path),
        parameters={**params, "STUDENT": student},
        prepare_only=True,
        kernel_name="trnlab",
        progress_bar=False,
    )
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        for var, value in (answers or {}).items():
            cell.source = re.sub(
                rf"^{var} = None\b.*$",
                lambda _, v=var, x=value: f"{v} = {x}",
                cell.source,
                flags=re.M,
            )
    if extra is not None:
        at = next(i for i, c in enumerate(nb.cells) if after in c.source)
        nb.cells.insert(at + 1, nbformat.v4.new_code_cell(extra))
    nbformat.write(nb, path)
    return path


def lab04_submission(path: Path, student: str, kernel: str) -> Path:
    """Lab 04 at its test parameters with ``kernel`` (source defining ``my_tiled``) in a cell
    after the setup and given as the answer to the first exercise (``my_matmul``)."""
    from tests.lab_checks import lab04 as lab04_checks

    return submission(
        path,
        student,
        {"my_matmul": "my_tiled"},
        lab=LAB04,
        parameters=lab04_checks.PARAMS,
        extra=kernel,
        after="from trnlab.exercises import lab04",
    )


def read_csv(csv_path: Path) -> list[dict]:
    with open(csv_path, newline="") as f:
        return list(csv.DictReader(f))


def sandbox_or_skip() -> None:
    """The grader refuses to run without a sandbox; these tests need bubblewrap. Without it
    they skip, except under CI (``CI`` set), where that is a failure."""
    from trnlab.course import sandbox

    try:
        sandbox.open_sandbox()
    except sandbox.SandboxUnavailable as err:
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
            raise
        pytest.skip(str(err))
