"""Run every benchmark module (or those named on the command line) and print JSON.

Usage: ``python -m benchmarks`` or ``python -m benchmarks import_time lab01``.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import platform
import sys
import time
from pathlib import Path


def _modules(names: list[str]) -> list[str]:
    here = Path(__file__).parent
    found = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))
    if not names:
        return found
    wanted = [f"bench_{n.removeprefix('bench_')}" for n in names]
    unknown = [w for w in wanted if w not in found]
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {unknown}; available: {found}")
    return wanted


def main(argv: list[str]) -> int:
    report = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "results": {},
    }
    for name in _modules(argv):
        module = importlib.import_module(f"benchmarks.{name}")
        t0 = time.perf_counter()
        figures = module.run()
        figures["wall_s"] = round(time.perf_counter() - t0, 3)
        report["results"][name.removeprefix("bench_")] = figures
        print(f"# {name}: done in {figures['wall_s']} s", file=sys.stderr)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
