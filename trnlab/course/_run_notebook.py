"""Inside a grading sandbox: run one submitted notebook and hand back its answers as data.

``python -I -m trnlab.course._run_notebook`` reads a JSON request on stdin::

    {"notebook": {...}, "parameters": {...}, "kernel": "trnlab",
     "cell_timeout": 300, "stop_after": 880, "isolated": true}

writes the notebook to its (empty, fresh) working folder, installs the answer capture in the
kernel through an IPython startup file (:func:`trnlab.course.answers.install_capture`: every
``Exercise.check`` also records its answer), runs the notebook top to bottom with papermill
(errors do not stop it; a cell over ``cell_timeout`` does), and prints one JSON object::

    {"answers": "<capture file text>", "errors": [{"cell": 12, "calls": [["lab01", "trust"]],
     "error": "NameError: ..."}], "failure": null or "what stopped the run"}

Everything it prints is the student's to influence (their code runs beside it, as the same
user): the grader treats it as untrusted data. Answers are checked in another, clean process.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

from trnlab.course.sandbox import descendants

#: Upper bounds on what is read back from the run.
MAX_REQUEST = 160 * 2**20  # a submission (at most 64 MiB) and its parameters, as JSON
MAX_ANSWERS = 200 * 2**20
MAX_NOTEBOOK = 200 * 2**20
PR_SET_CHILD_SUBREAPER = 36
CHECK_CALL = re.compile(r"^\s*(lab\d\d)\.(\w+)\.check\(", re.M)
STARTUP = """\
import os as _trnlab_os
from trnlab.course.answers import install_capture as _trnlab_install
_trnlab_install(_trnlab_os.environ["TRNLAB_GRADING_ANSWERS"])
del _trnlab_os, _trnlab_install
"""


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _cell_errors(nb) -> list[dict]:
    """Every cell that raised: its index, the exercise checks it calls, "Name: value"."""
    found = []
    for i, cell in enumerate(nb.get("cells", [])):
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        for out in cell.get("outputs", []) or []:
            if out.get("output_type") == "error":
                calls = [list(m.groups()) for m in CHECK_CALL.finditer(source)]
                error = _short(f"{out.get('ename', '')}: {out.get('evalue', '')}")
                found.append({"cell": i, "calls": calls, "error": error})
                break
    return found


def _read_bounded(path: Path, limit: int) -> tuple[str, bool]:
    if not path.exists():
        return "", False
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    return data[:limit].decode("utf-8", "replace"), len(data) > limit


def _stop_everything_else(isolated: bool) -> None:
    """Kill every other process of the run: in a sandbox, everything we may signal (its PID
    namespace holds only the run); without one, our descendants (orphans included: we are
    their subreaper)."""
    if isolated:
        try:
            os.kill(-1, signal.SIGKILL)  # all but ourselves and the namespace's init
        except ProcessLookupError:
            pass
        return
    for pid in descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _reap()


def _reap(grace: float = 5.0) -> None:
    """Collect our dead children (orphans killed above were re-parented to us)."""
    end = time.monotonic() + grace
    while time.monotonic() < end:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # none left
        if pid == 0:
            time.sleep(0.01)  # some still dying


def main() -> int:
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")  # private: children do not inherit it
    os.dup2(2, 1)  # anything the kernel or papermill prints goes to stderr
    request = json.loads(sys.stdin.buffer.read(MAX_REQUEST))
    work = Path.cwd()
    answers = work / "answers.jsonl"
    os.environ["TRNLAB_GRADING_ANSWERS"] = str(answers)
    startup = Path(os.environ["IPYTHONDIR"]) / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-trnlab-grading.py").write_text(STARTUP, encoding="utf-8")
    source, executed = work / "submission.ipynb", work / "executed.ipynb"
    source.write_text(json.dumps(request["notebook"]), encoding="utf-8")

    isolated = bool(request.get("isolated"))
    # Orphans of the run (a detached process) become our children, so we can end them.
    ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    stopped = threading.Event()

    def stop() -> None:
        stopped.set()
        _stop_everything_else(isolated)

    timer = threading.Timer(float(request["stop_after"]), stop)
    timer.daemon = True
    timer.start()

    failure = None
    try:
        import papermill as pm

        pm.execute_notebook(
            str(source),
            str(executed),
            parameters=request["parameters"],
            kernel_name=request["kernel"],
            cwd=str(work),
            execution_timeout=float(request["cell_timeout"]),
            progress_bar=False,
            log_output=False,
            store_widget_state=False,
            allow_errors=True,  # a broken answer cell does not stop the others
        )
    except Exception as exc:  # which cells raised is read below; anything else stops the run
        if type(exc).__name__ != "PapermillExecutionError":
            failure = _short(f"{type(exc).__name__}: {exc}")
    if stopped.is_set():
        failure = (
            f"the notebook was stopped after {float(request['stop_after']):.0f} s, its time "
            "limit; answers checked before then are graded"
        )

    errors: list[dict] = []
    text, too_big = _read_bounded(executed, MAX_NOTEBOOK)
    if text and not too_big:
        try:
            errors = _cell_errors(json.loads(text))
        except (ValueError, AttributeError, TypeError):
            errors = []
    timer.cancel()
    _stop_everything_else(isolated)  # the notebook has ended: nothing of it runs on
    captured, truncated = _read_bounded(answers, MAX_ANSWERS)
    result = {
        "answers": "" if truncated else captured,
        "answers_truncated": truncated,
        "errors": errors,
        "failure": failure,
    }
    out.write(json.dumps(result))
    out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
