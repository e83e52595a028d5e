"""First process inside a grading sandbox: set the limits, drop to the run's user, start the work.

``python -I -m trnlab.course._confine CONFIG`` (CONFIG is JSON written by
:mod:`trnlab.course.sandbox`): sets the resource limits, makes the scratch folders, drops to
the run's own unprivileged user id (when started as root), copies the numba cache template
into the scratch space, clears the environment to the one given, and execs the target
command. Nothing here depends on the student: it runs before any of their code.

``python -I -m trnlab.course._confine --probe`` prints a line, to check that a sandbox starts.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sys


def _limit(which: int, value: float) -> None:
    v = int(value)
    resource.setrlimit(which, (v, v))


def main(argv: list[str]) -> int:
    if argv == ["--probe"]:
        print("trnlab sandbox ok")
        return 0
    config = json.loads(argv[0])
    limits = config["limits"]
    os.umask(0o022)
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_CPU, limits["cpu_s"])
    _limit(resource.RLIMIT_AS, limits["memory_bytes"])
    _limit(resource.RLIMIT_FSIZE, limits["file_bytes"])
    if config["count_processes"]:
        # The run has a user id (or a user namespace) of its own: the limit counts only its
        # processes and threads.
        _limit(resource.RLIMIT_NPROC, limits["processes"])
    uid = config["uid"]
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    root = config["root"]
    env = dict(config["env"])
    for sub in ("work", "home", "tmp"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    cache = config.get("cache")
    if cache and config.get("cache_writable"):
        env["NUMBA_CACHE_DIR"] = cache
    elif cache and os.path.isdir(cache):
        shutil.copytree(cache, env["NUMBA_CACHE_DIR"], dirs_exist_ok=True)
    os.chdir(os.path.join(root, "work"))
    argv_ = config["argv"]
    os.execve(argv_[0], argv_, env)
    return 1  # pragma: no cover - execve does not return


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
