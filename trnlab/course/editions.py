"""Learner and instructor editions of the labs, authored once.

The learner edition is what ``labs/`` holds and what learners open: every exercise cell has
the shape ::

    print(lab01.clock.question)
    clock_ghz = None  # your answer, in GHz
    lab01.clock.check(clock_ghz)

and its check reports "not attempted" until the learner writes an answer. The solutions live
with the checks, in ``trnlab.exercises.labNN``. The instructor edition is generated from the
two: the same notebook, outputs cleared, with every ``answer = None`` line replaced by the
worked solution (the exercise's ``solution_text`` as comments, a reference kernel's source
when the answer is a kernel) and the reference answer, so that running it top to bottom passes
every check.

    python -m trnlab.course editions            # regenerate instructor/ from labs/
    python -m trnlab.course editions --check    # exit 1 if instructor/ has drifted

Never edit the instructor edition by hand: edit the learner lab (or the exercise module) and
regenerate. ``tests/test_editions.py`` fails when the two drift apart.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import inspect
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import nbformat

__all__ = ["Drift", "check", "instructor_edition", "regenerate"]

LAB_GLOB = "[0-9][0-9]_*.ipynb"
HEADER_ID = "instructor-edition"
_CHECK = re.compile(r"^(?P<mod>lab\d\d)\.(?P<ex>\w+)\.check\((?P<var>\w+)\)\s*$")


class EditionError(ValueError):
    """A learner lab whose exercise cells the generator cannot read."""


def _exercise(module: str, name: str):
    mod = importlib.import_module(f"trnlab.exercises.{module}")
    try:
        return getattr(mod, name)
    except AttributeError:
        raise EditionError(
            f"the lab checks {module}.{name}, but trnlab.exercises.{module} has no exercise "
            f"{name!r}; its exercises are: {', '.join(getattr(mod, '__all__', []))}"
        ) from None


def _kernel_function(reference):
    """The function of a reference kernel defined in trnlab (an ``@nki.jit`` kernel's ``fn``),
    or None when the reference is not a kernel."""
    from trnlab.nki import Kernel

    fn = reference.fn if isinstance(reference, Kernel) else reference
    if inspect.isfunction(fn) and fn.__module__.startswith("trnlab."):
        return fn
    return None


def _comment(text: str) -> list[str]:
    # Not wrapped: a worked solution is often a line of code with its own comment.
    return [f"# {line}".rstrip() for line in text.splitlines() or [""]]


def _solution_lines(module: str, name: str, var: str) -> list[str]:
    """The lines that replace ``var = None`` in the instructor edition."""
    ex = _exercise(module, name)
    out = ["# Solution (instructor edition):", *_comment(ex.solution_text or "(no worked text)")]
    reference = ex.reference()
    fn = _kernel_function(reference)
    if fn is not None:
        # A kernel: show its source in place (with its decorator), then use it as the answer.
        source = textwrap.dedent(inspect.getsource(fn)).rstrip().splitlines()
        used = dict(inspect.getclosurevars(fn).globals)
        if fn is not reference:  # an @nki.jit kernel: its decorator needs nki too
            import trnlab.nki

            used.setdefault("nki", trnlab.nki)
        modules = sorted(n for n, v in used.items() if inspect.ismodule(v))
        out += [f"import {used[n].__name__} as {n}" for n in modules]
        helpers = sorted(n for n in used if n not in modules)
        if helpers:
            out.append(f"from {fn.__module__} import {', '.join(helpers)}")
        out += ["", "", *source, "", "", f"{var} = {fn.__name__}"]
    else:
        out.append(f"{var} = {module}.{name}.reference()  # the reference answer")
    return out


def _fill_cell(source: str, where: str) -> str | None:
    """The instructor version of an exercise cell's source, or None if it is not one."""
    lines = source.splitlines()
    checks = [m for m in map(_CHECK.match, lines) if m]
    if not checks:
        return None
    for m in checks:
        var = m["var"]
        stub = [i for i, line in enumerate(lines) if re.match(rf"^{var}\s*=\s*None\b", line)]
        if len(stub) != 1:
            raise EditionError(
                f"{where}: the cell checks {m['mod']}.{m['ex']}({var}) but has "
                f"{len(stub)} lines '{var} = None  # ...' (it needs exactly one, the learner's "
                "answer line, for the instructor edition to fill in)"
            )
        i = stub[0]
        lines[i : i + 1] = _solution_lines(m["mod"], m["ex"], var)
    return "\n".join(lines)


def instructor_edition(nb: nbformat.NotebookNode, name: str = "lab") -> nbformat.NotebookNode:
    """The instructor edition of one learner lab (a new notebook; ``nb`` is not changed)."""
    out = copy.deepcopy(nb)
    out.metadata.pop("widgets", None)
    out.metadata.pop("papermill", None)
    out.metadata["trnlab"] = {"edition": "instructor", "generated_from": f"labs/{name}"}
    filled = 0
    for k, cell in enumerate(out.cells):
        cell.metadata.pop("execution", None)
        cell.metadata.pop("papermill", None)
        if cell.cell_type != "code":
            continue
        cell.outputs = []
        cell.execution_count = None
        new = _fill_cell(cell.source, f"labs/{name}, cell {k}")
        if new is not None:
            cell.source = new
            filled += 1
    header = nbformat.v4.new_markdown_cell(
        f"> **Instructor edition** of `labs/{name}`, with every exercise answered: run it top "
        "to bottom and every check passes. It is generated by `python -m trnlab.course "
        "editions` from the learner lab and the solutions in `trnlab.exercises`; do not edit "
        f"it by hand. {filled} exercise cells filled in.",
        id=HEADER_ID,
    )
    out.cells.insert(0, header)
    return out


def _render(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


@dataclass(frozen=True)
class Drift:
    """One instructor notebook that does not match what the learner lab generates."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def _pairs(labs: Path, out: Path):
    for lab in sorted(Path(labs).glob(LAB_GLOB)):
        yield lab, Path(out) / lab.name


def regenerate(labs: Path | str = "labs", out: Path | str = "instructor") -> list[Path]:
    """Write the instructor edition of every lab in ``labs`` into ``out``; returns the paths."""
    labs, out = Path(labs), Path(out)
    if not any(labs.glob(LAB_GLOB)):
        raise FileNotFoundError(f"no labs ({LAB_GLOB}) in {labs.resolve()}: run from the repo root")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for lab, target in _pairs(labs, out):
        nb = instructor_edition(nbformat.read(lab, as_version=4), lab.name)
        target.write_text(_render(nb), encoding="utf-8")
        written.append(target)
    stale = {p.name for p in out.glob(LAB_GLOB)} - {p.name for p in labs.glob(LAB_GLOB)}
    for name in sorted(stale):
        (out / name).unlink()
    return written


def check(labs: Path | str = "labs", out: Path | str = "instructor") -> list[Drift]:
    """Every way ``out`` differs from the instructor edition ``labs`` generates (empty if none)."""
    labs, out = Path(labs), Path(out)
    drift = []
    for lab, target in _pairs(labs, out):
        if not target.exists():
            drift.append(Drift(target, "missing"))
            continue
        expected = _render(instructor_edition(nbformat.read(lab, as_version=4), lab.name))
        if target.read_text(encoding="utf-8") != expected:
            drift.append(Drift(target, f"differs from what {lab} generates"))
    for extra in sorted(
        {p.name for p in out.glob(LAB_GLOB)} - {p.name for p in labs.glob(LAB_GLOB)}
    ):
        drift.append(Drift(out / extra, "has no learner lab any more"))
    return drift


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trnlab.course editions",
        description="Regenerate the instructor edition from the learner labs.",
    )
    parser.add_argument("--labs", default="labs", help="folder of learner labs (default: labs)")
    parser.add_argument("--out", default="instructor", help="instructor edition folder")
    parser.add_argument("--check", action="store_true", help="only report drift; exit 1 if any")
    args = parser.parse_args(argv)
    if args.check:
        drift = check(args.labs, args.out)
        for d in drift:
            print(d, file=sys.stderr)
        if drift:
            print("run: python -m trnlab.course editions", file=sys.stderr)
            return 1
        print(f"{args.out}/ matches {args.labs}/")
        return 0
    for path in regenerate(args.labs, args.out):
        print(f"wrote {path}")
    return 0
