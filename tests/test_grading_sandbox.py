"""The grading sandbox on its own: what code inside it can see, reach, change and leave behind.

Each test runs a few lines of Python in a real sandbox (bubblewrap) and looks at the outcome
from outside. They need bubblewrap (``make sandbox`` installs it as root); without it they
skip, except under CI, where a missing sandbox is a failure.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from trnlab.course import sandbox as sb

ROOT = Path(__file__).resolve().parents[1]


def _box(**kw) -> sb.Sandbox:
    try:
        return sb.open_sandbox(**kw)
    except sb.SandboxUnavailable as err:
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
            raise
        pytest.skip(str(err))


def _run(box: sb.Sandbox, code: str, limits: sb.Limits | None = None, **kw) -> sb.Outcome:
    return box.run(["-c", textwrap.dedent(code)], b"", limits or sb.Limits(wall_s=120), **kw)


def _json(outcome: sb.Outcome) -> dict:
    assert outcome.returncode == 0, outcome.stderr
    return json.loads(outcome.stdout)


def _survivors(outcome: sb.Outcome, box: sb.Sandbox) -> int:
    """Processes of the run alive after it ended (0 when nothing outlived it)."""
    if not box.as_root:
        pytest.skip("counting a run's processes needs the grader to run as root")
    return outcome.survivors


def test_the_sandbox_sees_only_the_system_python_and_trnlab_read_only(tmp_path):
    box = _box(hide=[tmp_path])
    secret = tmp_path / "secret.txt"
    secret.write_text("instructor only")
    out = _json(
        _run(
            box,
            f"""
            import json, os, pathlib
            def can_write(p):
                try:
                    pathlib.Path(p).write_text("x")
                    return True
                except OSError:
                    return False
            print(json.dumps({{
                "cwd": os.getcwd(),
                "cwd_files": os.listdir("."),
                "uid": os.getuid(),
                "secret": os.path.exists({str(secret)!r}),
                "tmp_path": os.path.exists({str(tmp_path)!r}),
                "repo_labs": os.path.exists({str(ROOT / "labs")!r}),
                "siblings": sorted(os.listdir({str(ROOT.parent)!r})),
                "write_trnlab": can_write({str(ROOT / "trnlab" / "escape.py")!r}),
                "write_usr": can_write("/usr/escape"),
                "write_cwd": can_write("here.txt"),
                "write_tmp": can_write("/tmp/escape-{os.getpid()}"),
                "trnlab": __import__("trnlab").__file__,
            }}))
            """,
        )
    )
    assert out["cwd"] == "/grade/work" and out["cwd_files"] == []
    assert not out["secret"] and not out["tmp_path"] and not out["repo_labs"]
    # beside the project's own folder, nothing of the grader's machine is visible
    assert set(out["siblings"]) <= {ROOT.name}
    assert not out["write_trnlab"] and not out["write_usr"]
    assert out["write_cwd"] and out["write_tmp"]
    assert out["trnlab"] == str(ROOT / "trnlab" / "__init__.py")
    # ... and the sandbox's /tmp is its own: nothing appeared in the host's.
    assert not Path(f"/tmp/escape-{os.getpid()}").exists()
    assert not (ROOT / "trnlab" / "escape.py").exists()
    if box.as_root:
        assert sb.UID_BASE <= out["uid"] < sb.UID_BASE + 256


def test_no_network_only_loopback():
    box = _box()
    out = _json(
        _run(
            box,
            """
            import json, socket
            results = {}
            for host, port in (("1.1.1.1", 53), ("pypi.org", 443)):
                try:
                    socket.create_connection((host, port), timeout=5).close()
                    results[host] = "connected"
                except OSError as err:
                    results[host] = type(err).__name__
            results["interfaces"] = sorted(n for _, n in socket.if_nameindex())
            print(json.dumps(results))
            """,
        )
    )
    assert out["1.1.1.1"] != "connected" and out["pypi.org"] != "connected"
    assert out["interfaces"] == ["lo"]


def test_a_detached_process_dies_with_the_run_and_sees_only_its_own_processes():
    box = _box()
    outcome = _run(
        box,
        """
        import json, os, time
        r, w = os.pipe()
        if os.fork() == 0:          # double fork + new session: a daemon
            os.setsid()
            if os.fork() == 0:
                os.write(w, str(os.getpid()).encode())
                while True:
                    time.sleep(0.05)
            os._exit(0)
        os.wait()
        daemon = int(os.read(r, 32))
        pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        print(json.dumps({"daemon": daemon, "pids": pids, "me": os.getpid()}))
        """,
    )
    out = _json(outcome)
    assert out["daemon"] in out["pids"]  # it was alive when the run ended...
    assert len(out["pids"]) <= 4  # (bwrap's init, the launcher-turned-python, the daemon)
    assert _survivors(outcome, box) == 0  # ...and it did not outlive the run


def test_wall_time_kills_the_whole_tree_and_says_so():
    box = _box()
    outcome = _run(
        box,
        """
        import os, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if os.fork() == 0:
            os.setsid()
            while True:
                pass
        while True:
            time.sleep(1)
        """,
        sb.Limits(wall_s=3),
    )
    assert outcome.timed_out and outcome.returncode is None
    assert _survivors(outcome, box) == 0


def test_process_memory_disk_and_output_limits_hold():
    box = _box()
    limits = sb.Limits(wall_s=120, processes=24, memory_bytes=1 * 2**30)
    out = _json(
        _run(
            box,
            """
            import json, os, time
            children, error = [], None
            try:
                for _ in range(200):
                    pid = os.fork()
                    if pid == 0:
                        time.sleep(60)
                        os._exit(0)
                    children.append(pid)
            except OSError as err:
                error = err.errno
            for pid in children:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            try:
                block = bytearray(3 * 2**30)
                memory = "allocated"
            except MemoryError:
                memory = "MemoryError"
            print(json.dumps({"forked": len(children), "fork_error": error, "memory": memory}))
            """,
            limits,
        )
    )
    if box.as_root:  # the process limit needs a user id of the run's own
        assert out["forked"] < 24 and out["fork_error"] == 11  # EAGAIN
    assert out["memory"] == "MemoryError"
    disk = _json(
        _run(
            box,
            """
            import json, os
            def write(name, mib):
                try:
                    with open(name, "wb") as f:
                        f.write(b"x" * (mib * 2**20))
                    return "ok"
                except OSError as err:
                    os.remove(name)  # what was written before the limit
                    return err.errno
            print(json.dumps([write("big", 20), write("a", 12), write("b", 12), write("c", 12)]))
            """,
            sb.Limits(wall_s=120, file_bytes=16 * 2**20, scratch_bytes=32 * 2**20),
        )
    )
    assert disk[0] == 27  # EFBIG: one file over the file-size limit
    if "--size" in box.features:
        assert disk[1:] == ["ok", "ok", 28]  # ENOSPC: the scratch space is full
    flood = _run(box, "import sys\nsys.stdout.write('x' * 3_000_000)", max_output=1_000_000)
    assert flood.truncated and len(flood.stdout) == 1_000_000


def test_missing_bubblewrap_is_refused_with_the_reason(monkeypatch):
    monkeypatch.setattr(sb.shutil, "which", lambda name: None)
    with pytest.raises(
        sb.SandboxUnavailable, match=r"bubblewrap \(bwrap\) is not installed.*unsafe"
    ):
        sb.open_sandbox()
    unsafe = sb.open_sandbox(unsafe=True)
    assert not unsafe.isolated and "no sandbox" in unsafe.describe()


def test_limits_must_be_positive():
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="must be a positive number"):
            sb.Limits(wall_s=bad)
