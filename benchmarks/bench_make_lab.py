"""Time from ``make lab`` in a fresh clone to JupyterLab answering, install included.

Clones this repository (its committed HEAD) into a temporary folder, runs ``make lab`` on a free
loopback port with a token, and polls until the server answers its API. pip's download cache is
used as it is on this machine (a first-ever install also downloads the wheels). Slow (minutes):
run it on its own, ``python -m benchmarks make_lab``.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT_S = 1200


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def _make_lab_until_answered(clone: Path, port: int, token: str, env: dict) -> float:
    """Seconds from ``make lab`` to the server answering; the server is stopped afterwards."""
    args = f"--no-browser --ServerApp.ip=127.0.0.1 --IdentityProvider.token={token}"
    url = f"http://127.0.0.1:{port}/api/status?token={token}"
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        ["make", "lab", f"PORT={port}", f"LAB_ARGS={args}"],
        cwd=clone,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        while not _answers(url):
            if proc.poll() is not None:
                raise RuntimeError(f"make lab exited with {proc.returncode} before answering")
            if time.perf_counter() - t0 > LIMIT_S:
                raise TimeoutError(f"JupyterLab did not answer within {LIMIT_S} s")
            time.sleep(0.2)
        return time.perf_counter() - t0
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def run() -> dict:
    port, token = _free_port(), secrets.token_hex(16)
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "trnlab"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(Path(tmp) / "runtime")}
        fresh = _make_lab_until_answered(clone, port, token, env)
        # The second start reuses the environment: what a learner waits for on later days.
        again = _make_lab_until_answered(clone, port, token, env)
    return {"fresh_clone_make_lab_to_answer_s": round(fresh, 1), "second_start_s": round(again, 1)}
