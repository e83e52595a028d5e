"""``python -m trnlab.course COMMAND ...``: the course tools from a terminal.

Each command lives in its own module, which has ``cli(argv) -> int``; run a command with
``--help`` for its options.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "doctor": ("doctor", "check this environment and say what is missing"),
    "syllabus": ("syllabus", "print the course map: labs, times, outcomes"),
    "pace": ("pace", "each lab's stated minutes against the pacing model's estimate"),
    "editions": ("editions", "regenerate (or --check) the instructor edition from labs/"),
    "variants": ("variants", "write per-student variants of a lab from a roster and a seed"),
    "grade": ("grading", "run a folder of submitted notebooks and write a CSV of checks"),
}


def _usage() -> str:
    lines = ["usage: python -m trnlab.course COMMAND [options]", "", "commands:"]
    lines += [f"  {name:<10} {text}" for name, (_, text) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"unknown command {name!r}.\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"trnlab.course.{COMMANDS[name][0]}")
    return int(module.cli(rest) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
