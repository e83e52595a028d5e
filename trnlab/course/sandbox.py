"""A throw-away sandbox for running students' code: bubblewrap namespaces, a fresh folder, limits.

Each :meth:`Sandbox.run` starts one Python module of this package in its own process tree,
under `bubblewrap <https://github.com/containers/bubblewrap>`_ (``bwrap``, Debian package
``bubblewrap``; ``make sandbox`` installs it):

- **its own namespaces**: PID (it sees only its own processes, and when its first process
  ends the kernel kills every other one: nothing detached survives), network (loopback only),
  IPC, UTS and, where possible, cgroup;
- **a filesystem of its own**: the system's ``/usr`` and ``/etc``, Python, the course's
  environment and trnlab's source, all read-only; a fresh empty tmpfs for its work folder,
  home and ``/tmp`` (sized); nothing else exists in it (no other home folders, no
  submissions folder, no grades CSV, no grader working folder);
- **its own user**: when the grader runs as root, the sandbox drops to an unprivileged user
  id of its own (one per concurrent run), so file permissions and the process limit apply;
  ``no_new_privs`` is set and mounts are ``nosuid``;
- **limits** (:class:`Limits`): wall time (the grader kills the tree), CPU seconds,
  address space and file size per process, processes and threads of the sandbox's user, and
  the size of its scratch space;
- input on stdin, output on stdout (capped); the environment is cleared.

Where bubblewrap is missing or cannot create namespaces, :func:`open_sandbox` raises
:class:`SandboxUnavailable` saying why; ``open_sandbox(unsafe=True)`` returns an unconfined
runner with the same interface (same limits, no isolation) for ``--unsafe-no-sandbox``.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

__all__ = ["Limits", "Outcome", "Sandbox", "SandboxUnavailable", "open_sandbox"]

#: Where the sandbox's scratch tmpfs is mounted inside it.
ROOT = "/grade"
#: Where a numba cache template is mounted (read-only) inside it.
CACHE_TEMPLATE = "/grade-cache"
#: First user id given to sandboxes when the grader runs as root (one per concurrent run).
UID_BASE = 2_000_100_000
UID_SLOTS = 256
SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
INSTALL_HINT = (
    "install bubblewrap (as root: make sandbox, or apt-get install bubblewrap), or pass "
    "--unsafe-no-sandbox to run the students' code with your own rights and files"
)


class SandboxUnavailable(RuntimeError):
    """No sandbox can be made here; the message says why and what to do."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed run.

    Attributes
    ----------
    wall_s : float
        Seconds before the grader kills the whole process tree.
    cpu_s : float
        CPU seconds per process (RLIMIT_CPU).
    memory_bytes : int
        Address space per process (RLIMIT_AS).
    processes : int
        Processes and threads of the sandbox's user (RLIMIT_NPROC; enforced when the grader
        runs as root, which gives every sandbox its own user id).
    file_bytes : int
        Largest file a process may write (RLIMIT_FSIZE).
    scratch_bytes : int
        Size of the sandbox's tmpfs work folder (and of its ``/tmp``).
    """

    wall_s: float = 900.0
    cpu_s: float = 1800.0
    memory_bytes: int = 4 * 2**30
    processes: int = 256
    file_bytes: int = 256 * 2**20
    scratch_bytes: int = 512 * 2**20

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not (isinstance(value, int | float) and value > 0 and value != float("inf")):
                raise ValueError(f"sandbox limit {name} must be a positive number, not {value!r}")


@dataclass(frozen=True)
class Outcome:
    """What a sandboxed run left: exit status, its stdout (capped), the tail of its stderr.

    ``uid`` is the run's own user id (grader as root) and ``survivors`` the number of its
    processes still alive once the sandbox had ended (0: nothing outlived it), counted
    before the grader kills any that did.
    """

    returncode: int | None
    stdout: bytes
    stderr: str
    timed_out: bool
    truncated: bool
    seconds: float
    uid: int | None = None
    survivors: int | None = None


def _pump_in(pipe, data: bytes) -> None:
    try:
        pipe.write(data)
    except OSError:  # it stopped reading (died, or did not want it)
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def _pump_out(pipe, limit: int, sink: list, flags: dict, tail: bool = False) -> None:
    """Read ``pipe`` to its end, keeping at most ``limit`` bytes (the first, or the last)."""
    kept = 0
    while True:
        chunk = pipe.read(65536)
        if not chunk:
            break
        if tail:
            sink.append(chunk)
            while sum(map(len, sink)) > limit and len(sink) > 1:
                sink.pop(0)
        elif kept < limit:
            sink.append(chunk[: limit - kept])
            kept += len(sink[-1])
            if kept >= limit:
                flags["truncated"] = True
        else:
            flags["truncated"] = True  # keep draining, so the writer never blocks


class Sandbox:
    """Runs modules of ``trnlab.course`` confined (see the module docstring).

    Parameters
    ----------
    tool : str or None
        Path of ``bwrap``; None runs unconfined (``--unsafe-no-sandbox``).
    """

    def __init__(self, tool: str | None, hide: Iterable[str | os.PathLike] = ()) -> None:
        self.tool = tool
        self.hide = [os.path.realpath(p) for p in hide]
        self.isolated = tool is not None
        self.as_root = os.geteuid() == 0
        self.features = _features(tool) if tool else frozenset()

    def describe(self) -> str:
        if not self.isolated:
            return "no sandbox (--unsafe-no-sandbox): students' code runs with your rights"
        who = "its own user id per run" if self.as_root else "your user id (not root)"
        extra = "" if "--size" in self.features else "; scratch space not size-limited (old bwrap)"
        return f"bubblewrap ({self.tool}), {who}{extra}"

    # ------------------------------------------------------------------------------------------
    def run(
        self,
        args: Sequence[str],
        stdin: bytes,
        limits: Limits,
        *,
        cache_template: Path | None = None,
        writable_cache: bool = False,
        max_output: int = 256 * 2**20,
    ) -> Outcome:
        """Run ``python -I <args>`` confined (``args``: ``["-m", module]`` or ``["-c", code]``);
        feed it ``stdin``; collect its stdout.

        Parameters
        ----------
        args : sequence of str
            Arguments of this environment's Python inside the sandbox.
        stdin : bytes
            Its whole input.
        limits : Limits
        cache_template : path, optional
            A numba cache folder copied into the run's scratch space (read-only in the run),
            or with ``writable_cache`` used in place (the grader's own trusted warm-up).
        max_output : int
            Bytes of stdout kept; more sets ``truncated``.
        """
        uid, lock = _take_uid() if (self.isolated and self.as_root) else (None, None)
        scratch = None if self.isolated else Path(tempfile.mkdtemp(prefix="trnlab-unsafe-"))
        try:
            root = ROOT if self.isolated else str(scratch)
            config = {
                "root": root,
                "uid": uid,
                "count_processes": self.isolated,
                "limits": asdict(limits),
                "cache": None,
                "cache_writable": bool(writable_cache),
                "env": _environment(root),
                "argv": [sys.executable, "-I", *args],
            }
            if cache_template is not None:
                config["cache"] = (
                    str(cache_template) if writable_cache or not self.isolated else CACHE_TEMPLATE
                )
            launcher = [sys.executable, "-I", "-m", "trnlab.course._confine", json.dumps(config)]
            if self.isolated:
                argv = [*self._bwrap(limits, cache_template, writable_cache), "--", *launcher]
                cwd = "/"
            else:
                argv, cwd = launcher, str(scratch)
            outcome = self._execute(argv, cwd, stdin, limits, max_output)
            if uid is not None:
                outcome = replace(outcome, uid=uid, survivors=_wait_gone(uid))
            return outcome
        finally:
            if uid is not None:
                _kill_user(uid)  # nothing may outlive the run; normally there is nothing
                os.close(lock)  # releases the user id for the next run
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)

    def _execute(self, argv, cwd, stdin: bytes, limits: Limits, max_output: int) -> Outcome:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
            start_new_session=True,  # its own process group, killable as one
        )
        out: list[bytes] = []
        err: list[bytes] = []
        flags: dict = {}
        pumps = [
            threading.Thread(target=_pump_in, args=(proc.stdin, stdin), daemon=True),
            threading.Thread(
                target=_pump_out, args=(proc.stdout, max_output, out, flags), daemon=True
            ),
            threading.Thread(
                target=_pump_out, args=(proc.stderr, 65536, err, {}, True), daemon=True
            ),
        ]
        for p in pumps:
            p.start()
        timed_out = False
        try:
            proc.wait(timeout=limits.wall_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            if proc.poll() is None:
                self._kill(proc)
            proc.wait()
        for p in pumps[1:]:
            p.join(timeout=30)
        return Outcome(
            returncode=None if timed_out else proc.returncode,
            stdout=b"".join(out),
            stderr=b"".join(err).decode("utf-8", "replace"),
            timed_out=timed_out,
            truncated=bool(flags.get("truncated")),
            seconds=time.monotonic() - t0,
        )

    def _kill(self, proc: subprocess.Popen) -> None:
        # bwrap's child dies with it (--die-with-parent), and with the PID namespace's first
        # process, every process of the run. Unconfined: its descendants as they are now
        # (one that re-parented itself away is out of reach), then its process group.
        if not self.isolated:
            for pid in descendants(proc.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.kill()

    # ------------------------------------------------------------------------------------------
    def _bwrap(self, limits: Limits, cache: Path | None, writable_cache: bool) -> list[str]:
        argv = [
            self.tool,
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname",
            "trnlab-grade",
            "--die-with-parent",
            "--new-session",
        ]
        if self.as_root:
            # No user namespace: the launcher starts as root inside, sets the limits and drops
            # to the run's own unprivileged user id (so RLIMIT_NPROC counts only its processes).
            argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        else:
            argv += ["--unshare-user"]
            if "--disable-userns" in self.features:
                argv += ["--disable-userns"]
        made: set[str] = {"/"}
        bound: set[str] = set()
        for d in SYSTEM_DIRS:
            if os.path.islink(d):
                argv += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                argv += ["--ro-bind", d, d]
            made.add(d)
            bound.add(d)
        argv += ["--proc", "/proc", "--dev", "/dev"]
        sized = ["--size", str(int(limits.scratch_bytes))] if "--size" in self.features else []
        argv += ["--perms", "1777", *sized, "--tmpfs", "/tmp"]
        argv += ["--perms", "1777", *sized, "--tmpfs", "/dev/shm"]
        made |= {"/proc", "/dev", "/tmp", "/dev/shm"}
        bound |= {"/proc", "/dev"}
        for path in _visible_paths():
            argv += _parents(path, made, bound)
            argv += ["--ro-bind", path, path]
            made.add(path)
            bound.add(path)
        for h in self.hide:
            # Folders that must not be seen (submissions, grades) hidden under an empty tmpfs
            # if they happen to lie inside a visible one.
            folder = h if os.path.isdir(h) else os.path.dirname(h)
            if any(folder == b or folder.startswith(b + "/") for b in bound - {"/proc", "/dev"}):
                argv += ["--tmpfs", folder]
        argv += ["--perms", "1777", *sized, "--tmpfs", ROOT]
        if cache is not None:
            target = str(cache) if writable_cache else CACHE_TEMPLATE
            if writable_cache:
                argv += _parents(target, made, bound)
            argv += ["--bind" if writable_cache else "--ro-bind", str(cache), target]
        argv += ["--chdir", ROOT]
        return argv


def _features(tool: str) -> frozenset[str]:
    """The options this bubblewrap knows (older ones lack --size and --disable-userns)."""
    try:
        text = subprocess.run(
            [tool, "--help"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(w for w in text.split() if w.startswith("--"))


def _parents(path: str, made: set[str], bound: set[str]) -> list[str]:
    """``--dir`` for every ancestor of ``path`` not there yet, world-readable (bwrap makes
    missing ancestors 0700, which an unprivileged sandbox user could not cross)."""
    out = []
    parts = Path(path).parts
    for i in range(2, len(parts)):
        p = str(Path(*parts[:i]))
        if p in made or any(p.startswith(b + "/") for b in bound):
            continue
        out += ["--perms", "0755", "--dir", p]
        made.add(p)
    return out


def _visible_paths() -> list[str]:
    """Folders the sandbox must see (read-only): Python, the environment, trnlab's source."""
    import importlib.util

    wanted = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    wanted.add(str(Path(sys.executable).resolve().parent.parent))
    # Not sys.path as a whole: it may hold the working folder (python -m, pytest), which can
    # be the course repository with the submissions in it.
    for name in ("trnlab", "trnlab.widgets"):
        spec = importlib.util.find_spec(name)
        for loc in (spec.submodule_search_locations or []) if spec else []:
            wanted.add(loc)
    paths = set()
    for p in wanted:
        for q in (os.path.abspath(p), os.path.realpath(p)):
            if not any(q == s or q.startswith(s + "/") for s in SYSTEM_DIRS):
                paths.add(q)
    # Keep the outermost folders only, shallowest first.
    keep = [p for p in paths if not any(p != o and p.startswith(o + "/") for o in paths)]
    return sorted(keep, key=lambda p: (p.count("/"), p))


def _environment(root: str) -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    home = f"{root}/home"
    return {
        "PATH": f"{venv_bin}:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": "/tmp" if root == ROOT else root,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "NUMBA_CACHE_DIR": f"{root}/numba",
        "IPYTHONDIR": f"{home}/.ipython",
        "MPLCONFIGDIR": f"{home}/.matplotlib",
        "JUPYTER_PLATFORM_DIRS": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        # One thread each: the grader runs as many sandboxes as there are cores.
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMBA_NUM_THREADS": "1",
    }


def _take_uid() -> tuple[int, int]:
    """A user id no other sandbox on this machine is using, and the lock that reserves it.

    Locks are files under the temporary folder, held (``flock``) for the run; they are
    released when the run ends, even if the grader dies.
    """
    folder = Path(tempfile.gettempdir()) / "trnlab-sandbox-uids"
    folder.mkdir(mode=0o700, exist_ok=True)
    while True:
        for i in range(UID_SLOTS):
            fd = os.open(folder / f"{UID_BASE + i}.lock", os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            if processes_of(UID_BASE + i):  # a leftover of a grader that was killed
                _kill_user(UID_BASE + i)
            return UID_BASE + i, fd
        time.sleep(0.05)  # every id busy: more concurrent runs than slots


def _wait_gone(uid: int, grace: float = 10.0) -> int:
    """Wait (up to ``grace`` s) for the kernel to finish tearing down the run's processes;
    the number still alive after that."""
    end = time.monotonic() + grace
    while processes_of(uid) and time.monotonic() < end:
        time.sleep(0.01)
    return len(processes_of(uid))


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid``, from /proc's parent links."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            ppid = int(stat.rsplit(b")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill_user(uid: int) -> None:
    """SIGKILL every process of ``uid`` (a sandbox's own user id) still alive."""
    for pid in processes_of(uid):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def processes_of(uid: int) -> list[int]:
    """PIDs of live (not zombie) processes whose real or effective user id is ``uid``.

    Read from ``/proc/PID/status`` (the owner of ``/proc/PID`` is root for a process that
    made itself non-dumpable, so it would hide there).
    """
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"State:") and line.split()[1] == b"Z":
                        break
                    if line.startswith(b"Uid:"):
                        if uid in [int(v) for v in line.split()[1:3]]:
                            found.append(int(entry.name))
                        break
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass
    return found


_PROBE: dict[str, str | None] = {}


def open_sandbox(unsafe: bool = False, hide: Iterable[str | os.PathLike] = ()) -> Sandbox:
    """A :class:`Sandbox`, after checking that bubblewrap works here.

    Parameters
    ----------
    unsafe : bool
        Return an unconfined runner instead (``--unsafe-no-sandbox``).
    hide : paths
        Folders (or files' folders) to hide should they lie inside a folder the sandbox sees.

    Raises
    ------
    SandboxUnavailable
        bubblewrap is not installed, or cannot create namespaces here; the message says which
        and what to do.
    """
    if unsafe:
        return Sandbox(None, hide)
    tool = shutil.which("bwrap")
    if tool is None:
        raise SandboxUnavailable(f"no sandbox: bubblewrap (bwrap) is not installed; {INSTALL_HINT}")
    if tool not in _PROBE:
        _PROBE[tool] = _probe(Sandbox(tool))
    if _PROBE[tool] is not None:
        raise SandboxUnavailable(
            f"no sandbox: bubblewrap is installed but could not start one here "
            f"({_PROBE[tool]}); {INSTALL_HINT}"
        )
    return Sandbox(tool, hide)


def _probe(box: Sandbox) -> str | None:
    """None if a trivial confined run works, else what went wrong."""
    try:
        out = box.run(["-m", "trnlab.course._confine", "--probe"], b"", Limits(wall_s=60))
    except OSError as err:
        return str(err)
    if out.returncode == 0 and out.stdout.strip() == b"trnlab sandbox ok":
        return None
    why = out.stderr.strip().splitlines()
    return why[-1] if why else f"exit status {out.returncode}"


def parse_json_output(outcome: Outcome) -> Mapping | None:
    """The JSON object a run printed, or None if it printed none (or too much)."""
    if outcome.truncated or not outcome.stdout.strip():
        return None
    try:
        value = json.loads(outcome.stdout)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
