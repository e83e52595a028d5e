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

from tests._load import load_scaled  # noqa: F401 (the grading tests import it from here)
from tests.lab_checks import lab01 as lab01_checks

ROOT = Path(__file__).resolve().parents[1]
LAB01 = ROOT / "labs" / "01_trainium_family.ipynb"
LAB05 = ROOT / "labs" / "05_write_a_kernel.ipynb"

RIGHT = {
    # Trainium2: 667 dense BF16 TFLOPS / (8 cores x 128 x 128 PEs x 2 FLOP per MAC), in GHz.
    "clock_ghz": 667e12 / (8 * 128 * 128 * 2) / 1e9,
    # Trainium3 MXFP8 (2,517 TFLOPS) over Trainium cFP8 (at its BF16 rate, 190 TFLOPS).
    "growth": 2517e12 / 190e12,
    # trn1.32xlarge: 9.8 TB/s printed for 16 chips.
    "per_chip_gbs": 9.8e12 / 16 / 1e9,
    "trust": "'docs'",
    # Trainium3's BF16 ridge: 671 TFLOP/s over 4.9 TB/s of HBM.
    "ridge_trn3": 671e12 / 4.9e12,
}
WRONG = {
    "clock_ghz": 2.4,  # the documented clock, not the one the rating implies
    "growth": 8.0,
    "per_chip_gbs": 820,  # the chip documentation's figure, not the instance's
    "trust": "'glossary'",
    "ridge_trn3": 230,  # Trainium2's BF16 ridge: the "ridge keeps rising" reading
}


# In the order of the lab's check cells.
KEYS = ["lab01.growth", "lab01.ridge_bf16", "lab01.clock", "lab01.bandwidth", "lab01.trust"]
#: A learner's first tiled matmul for lab 05 (``my_tiled``), an NKI kernel as a cell would
#: hold it (the lab's setup cell has imported nki, nl and nisa).
TILED_KERNEL = """
@nki.jit
def my_tiled(a_t, b):
    K, M = a_t.shape
    N = b.shape[1]
    c = nl.ndarray((M, N), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    for m0 in nl.affine_range(0, M, 128):
        ms = min(128, M - m0)
        for n0 in nl.affine_range(0, N, 512):
            ns = min(512, N - n0)
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k0 in nl.affine_range(0, K, 128):
                ks = min(128, K - k0)
                a_tile = nl.ndarray((128, 128), dtype=a_t.dtype, buffer=nl.sbuf)
                b_tile = nl.ndarray((128, 512), dtype=b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a_tile[:ks, :ms], src=a_t[k0 : k0 + ks, m0 : m0 + ms])
                nisa.dma_copy(dst=b_tile[:ks, :ns], src=b[k0 : k0 + ks, n0 : n0 + ns])
                nisa.nc_matmul(dst=acc[:ms, :ns], stationary=a_tile[:ks, :ms],
                               moving=b_tile[:ks, :ns], accumulate=k0 > 0)
            c_tile = nl.ndarray((128, 512), dtype=c.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=c_tile[:ms, :ns], src=acc[:ms, :ns])
            nisa.dma_copy(dst=c[m0 : m0 + ms, n0 : n0 + ns], src=c_tile[:ms, :ns])
    return c
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


def lab05_submission(path: Path, student: str, kernel: str) -> Path:
    """Lab 05 at its test parameters with ``kernel`` (source defining ``my_tiled``) in a cell
    after the setup and given as the answer to the first exercise (``my_matmul``)."""
    from tests.lab_checks import lab05 as lab05_checks

    return submission(
        path,
        student,
        {"my_matmul": "my_tiled"},
        lab=LAB05,
        parameters=lab05_checks.PARAMS,
        extra=kernel,
        after="from trnlab.exercises import lab05",
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


def alive(name: str) -> list[int]:
    """PIDs of live (not zombie) processes whose command name (``/proc/PID/comm``) is
    ``name``."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                comm = Path(f"/proc/{entry.name}/comm").read_text().strip()
                state = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if comm == name and state != "Z":
                found.append(int(entry.name))
    return found


def daemon_cell(targets: list[str], name: str) -> str:
    """A cell that starts a detached process (double fork, new session) named ``name`` that
    keeps rewriting ``targets``; it records its pid in ``daemon_pid``."""
    return f"""
import ctypes, os, time
marker = os.path.abspath("daemon-started")
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)  # PR_SET_NAME
        with open(marker, "w") as f:
            f.write(str(os.getpid()))
        while True:
            for target in {targets!r}:
                try:
                    with open(target, "w") as f:
                        f.write("rewritten by a detached process")
                except OSError:
                    pass
            time.sleep(0.05)
    os._exit(0)
os.wait()
deadline = time.monotonic() + 120
while not os.path.exists(marker) and time.monotonic() < deadline:
    time.sleep(0.01)
daemon_pid = open(marker).read()
"""
