"""Hostile submissions: the grader's sandbox and its clean checker hold, and honest students in
the same batch are graded as usual.

One batch of lab 01 notebooks (graded two at a time) holds a student who tries to write
outside the sandbox, overwrite another student's notebook and leave a detached process
rewriting the grades CSV; one who forges the results bundle, switches the solutions on and
patches the checks in their kernel; one with an infinite loop; one who forks and allocates
without bound; a victim and an honest student. A second batch holds lab 05
NKI kernels: an honest one, and one that patches the checks from inside the kernel.

Afterwards: nothing outside the sandbox changed (the submissions, a canary file, the host's
/tmp, trnlab's source), no process of the batch is alive, the CSV is exactly the rows the
grader returned, and every hostile exercise is graded as not passed.
"""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import pytest

from tests.grading_helpers import (
    KEYS,
    RIGHT,
    ROOT,
    TILED_KERNEL,
    WRONG,
    alive,
    daemon_cell,
    lab05_submission,
    load_scaled,
    read_csv,
    sandbox_or_skip,
    submission,
)
from trnlab.course import grading

pytestmark = pytest.mark.notebook


def _snapshot(*roots: Path, skip: tuple[Path, ...] = ()) -> dict[str, tuple[int, str]]:
    """(size, sha256) of every file under ``roots`` (bytecode caches left out: the grader's
    own imports may write them)."""
    found = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path not in skip:
                data = path.read_bytes()
                found[str(path)] = (len(data), hashlib.sha256(data).hexdigest())
    return found


def _escape_cell(targets: list[str], victim: Path) -> str:
    return f"""
import glob, os, shutil
def _try_write(path):
    try:
        with open(path, "w") as f:
            f.write("written from inside a submission")
        return True
    except OSError:
        return False
written = [p for p in {targets!r} if _try_write(p)]
# overwrite the victim's notebook (a failing one) with this one (a passing one), wherever found
mine = os.path.abspath("submission.ipynb")
tampered = []
found = [p for top in ("/grade", "/tmp", "/work", "/root", "/home")
         for p in glob.glob(top + "/**/*vic*.ipynb", recursive=True)]
for path in [{str(victim)!r}, *found]:
    try:
        shutil.copyfile(mine, path)
        tampered.append(path)
    except OSError:
        pass
"""


FORGE_CELL = f"""
from IPython.display import display
from trnlab.exercises import MIME_TYPE
exercises.configure(solutions=True)  # untouched answers now "pass" in this kernel
forged = {{"lab": "lab01", "values": {{}}, "exercises": dict.fromkeys({KEYS!r}, "passed"),
          "messages": dict.fromkeys({KEYS!r}, "correct")}}
display({{MIME_TYPE: forged, "text/plain": "all passed"}}, raw=True)
"""

PATCH_CELL = """
import trnlab.exercises._checks as _checks
for _ex in (lab01.clock, lab01.growth, lab01.bandwidth_implied, lab01.trust):
    _ex._check = lambda answer: None  # every answer "correct" in this kernel
_checks.close_to = lambda *a, **k: (lambda answer: None)
"""


HOG_CELL = """
import os, time
children = []
try:
    for _ in range(100_000):
        pid = os.fork()
        if pid == 0:
            time.sleep(600)
            os._exit(0)
        children.append(pid)
except OSError:
    pass
for pid in children:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
try:
    hog = bytearray(64 * 2**30)
except MemoryError:
    hog = None
forks = len(children)
"""


def _rows_of(got: dict, student: str) -> dict:
    """One student's rows (exercise: status, message), printed when an assertion fails."""
    return {k[1]: v for k, v in got.items() if k[0] == student}


def test_hostile_lab01_submissions_change_nothing_outside_and_pass_nothing(tmp_path):
    sandbox_or_skip()
    folder = tmp_path / "submissions"
    folder.mkdir()
    csv_path = tmp_path / "out" / "grades.csv"
    canary = tmp_path / "canary.txt"
    canary.write_text("the instructor's file")
    token = uuid.uuid4().hex[:10]
    host_tmp = Path("/tmp") / f"trnlab-escape-{token}"
    source_file = ROOT / "trnlab" / "exercises" / "_checks.py"
    name = "01_trainium_family__{}.ipynb".format
    victim = folder / name("vic")
    daemon_name = f"trnlab{token[:8]}"

    targets = [str(canary), str(csv_path), str(folder / "planted.ipynb"), str(host_tmp)]
    targets += [str(source_file), str(ROOT / "planted.txt"), "/root/planted", "/usr/planted"]
    # Eve writes outside, tampers with the victim, then leaves a detached process rewriting
    # the grades and the canary; each attack leaves its result in her answer to 'trust'.
    eve_answers = {
        **WRONG,
        "trust": "f'escape written={written} tampered={tampered}; daemon {daemon_pid} was running'",
    }
    eve = _escape_cell(targets, victim) + daemon_cell([str(csv_path), str(canary)], daemon_name)
    submission(folder / name("eve"), "eve", eve_answers, extra=eve)
    # Fred forges the results bundle, switches the solutions on and patches the checks; two
    # answers are wrong, the rest left untouched (what switching the solutions on would fill).
    fred_answers = {k: WRONG[k] for k in ("growth", "clock_ghz")}
    submission(folder / name("fred"), "fred", fred_answers, extra=FORGE_CELL + PATCH_CELL)
    loop = {k: RIGHT[k] for k in ("growth", "ridge_trn3")}
    loop["clock_ghz"] = "None\nwhile True:\n    pass"
    submission(folder / name("lou"), "lou", loop)
    hog_answers = {**RIGHT, "trust": "f'forked {forks}, hog {hog}'"}
    submission(folder / name("hal"), "hal", hog_answers, extra=HOG_CELL)
    submission(folder / name("vic"), "vic", WRONG)
    submission(folder / name("pat"), "pat", RIGHT)
    # Another lab's notebook handed in as this one (its exercises are not this lab's).
    from tests.lab_checks import lab00 as lab00_checks

    lab00 = ROOT / "labs" / "00_welcome.ipynb"
    submission(folder / name("zed"), "zed", lab=lab00, parameters=lab00_checks.PARAMS)

    before = _snapshot(tmp_path, ROOT / "trnlab")
    rows = grading.grade(
        folder,
        csv_path,
        timeout=load_scaled(20),  # per cell: lou's loop is stopped after this
        notebook_timeout=load_scaled(240),
        lab="01",
        jobs=2,
        log=None,
    )

    # Nothing outside the sandboxes changed, and nothing of the batch is still running.
    assert _snapshot(tmp_path, ROOT / "trnlab", skip=(csv_path,)) == before
    assert not host_tmp.exists() and not (ROOT / "planted.txt").exists()
    assert alive(daemon_name) == []
    assert read_csv(csv_path) == rows

    got = {(r["student"], r["exercise"]): (r["status"], r["message"]) for r in rows}
    status = {k: v[0] for k, v in got.items()}
    # An honest student and the victim are graded as if alone.
    assert [status["pat", k] for k in KEYS] == ["passed"] * len(KEYS), _rows_of(got, "pat")
    assert [status["vic", k] for k in KEYS] == ["failed"] * len(KEYS), _rows_of(got, "vic")
    # The attacker's own wrong answers stay wrong; it wrote nothing and tampered with nothing.
    assert [status["eve", k] for k in KEYS] == ["failed"] * len(KEYS), _rows_of(got, "eve")
    # (the one write that "worked" went to the sandbox's own /tmp, which left with it)
    assert f"escape written=[{str(host_tmp)!r}] tampered=[]" in got["eve", "lab01.trust"][1]
    # Her daemon ran in the sandbox (its pid is in the answer) and died with it.
    assert "was running" in got["eve", "lab01.trust"][1]
    # Forged bundle, solutions switched on, checks patched in the kernel: the grader's own
    # checks say failed for the wrong answers and not attempted for the untouched ones.
    fred = ["failed", "not attempted", "failed", "not attempted", "not attempted"]
    assert [status["fred", k] for k in KEYS] == fred, _rows_of(got, "fred")
    # The infinite loop: what came before is graded, the rest is not passed, and it says why.
    # (the timed-out cell was interrupted: KeyboardInterrupt)
    assert [status["lou", k] for k in KEYS] == ["passed"] * 2 + ["error"] + ["not attempted"] * 2, (
        _rows_of(got, "lou")
    )
    assert got["lou", ""][1].startswith("CellTimeoutError: A cell timed out")
    # Forks and memory hit the sandbox's limits, not the machine; the student still graded.
    assert [status["hal", k] for k in KEYS[:-1]] == ["passed"] * (len(KEYS) - 1)
    assert "hog None" in got["hal", "lab01.trust"][1]
    # The other lab's notebook is graded as this lab, and says so.
    assert [status["zed", k] for k in KEYS] == ["not attempted"] * len(KEYS), _rows_of(got, "zed")
    assert got["zed", ""] == ("error", "this notebook is lab00's, but lab01 is being graded")
    assert {s for s, _ in got} == {"eve", "fred", "lou", "hal", "vic", "pat", "zed"}


CHEAT_KERNEL = """
@nki.jit
def my_tiled(a_t, b):
    import trnlab.exercises.lab05 as checks
    checks._compare = lambda *args, **kw: None  # every comparison "matches" from now on
    checks._nan_problem = lambda *args, **kw: None  # and NaN is fine
    M, N = a_t.shape[1], b.shape[1]
    c = nl.ndarray((M, N), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    t = nl.ndarray((1, 1), dtype=a_t.dtype, buffer=nl.sbuf)
    u = nl.ndarray((1, 1), dtype=b.dtype, buffer=nl.sbuf)
    acc = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.psum)
    out = nl.ndarray((1, 1), dtype=c.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a_t[0:1, 0:1])
    nisa.dma_copy(dst=u, src=b[0:1, 0:1])
    nisa.nc_matmul(dst=acc, stationary=t, moving=u)
    nisa.tensor_copy(dst=out, src=acc)
    nisa.dma_copy(dst=c[0:1, 0:1], src=out)
    return c
"""


def test_a_lab05_kernel_that_patches_the_checks_is_graded_on_what_it_computes(tmp_path):
    sandbox_or_skip()
    folder = tmp_path / "submissions"
    folder.mkdir()
    for student, kernel in (("kim", TILED_KERNEL), ("max", CHEAT_KERNEL)):
        lab05_submission(folder / f"05_write_a_kernel__{student}.ipynb", student, kernel)
    rows = grading.grade(
        folder, tmp_path / "g.csv", timeout=load_scaled(300), lab="05", jobs=2, log=None
    )
    got = {(r["student"], r["exercise"]): (r["status"], r["message"]) for r in rows}
    assert got["kim", "lab05.correct_matmul"] == ("passed", "correct")
    status, message = got["max", "lab05.correct_matmul"]
    assert status == "failed" and "never stored" in message  # one element of C, the rest NaN
    for student in ("kim", "max"):
        for key in ("lab05.fits_sbuf", "lab05.fast", "lab05.epilogue"):
            assert got[student, key][0] == "not attempted"
    assert not [r for r in rows if r["exercise"] == ""]  # no submission-level errors
