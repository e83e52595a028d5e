"""How long a lab takes a learner: a small pacing model read off the committed notebook.

Each lab's time is the sum of what a learner does in it, top to bottom:

- **reading**: prose words in markdown cells at a technical reading rate;
- **running**: every code cell read and run (a per-cell figure, its lines, the printed lines
  read) plus the cell's own execution time, as recorded in the notebook's metadata when it
  was executed (nbclient's ``execution`` timestamps);
- **exercises**: one figure per kind (a number, a predict-then-run, a pick, an NKI kernel, a
  kernel puzzle),
  a first attempt plus the expected share of a second attempt after the feedback;
- **dashboards** explored and **charts** read.

The per-activity figures are assumptions about people, with their reasoning, in
``trnlab/course/data/pace.toml``; docs/pacing.md records the walkthrough that checked them.
The labs, their stated minutes and their dashboards come from the syllabus
(:mod:`trnlab.course.syllabus`); tests/test_pace.py holds each lab's stated time within the
band the file gives.

>>> from trnlab.course import pace
>>> est = pace.estimate_lab(5)
>>> est.kinds["kernel"]
4
>>> est.minutes > 100
True
"""

from __future__ import annotations

import argparse
import functools
import importlib
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import nbformat

from . import syllabus
from .syllabus import tomllib

__all__ = [
    "DATA",
    "LABS",
    "Estimate",
    "Rates",
    "cli",
    "estimate",
    "estimate_lab",
    "exercise_kind",
    "rates",
    "table",
]

#: The per-activity figures (assumptions, with their reasoning).
DATA = Path(__file__).with_name("data") / "pace.toml"
#: The committed learner labs.
LABS = Path(__file__).resolve().parents[2] / "labs"

KINDS = ("numeric", "predict", "choice", "kernel", "puzzle")
_CHECK = re.compile(r"\b(lab\d\d)\.(\w+)\.check\(")
_WORD = re.compile(r"\S*[^\W_]\S*")  # a token with a letter or digit (not "|", "#", "---")
_PLOTLY = "application/vnd.plotly.v1+json"


@dataclass(frozen=True)
class Rates:
    """The pacing figures of ``pace.toml`` (minutes unless named otherwise)."""

    words_per_minute: float
    minutes_per_cell: float
    seconds_per_line: float
    seconds_per_output_line: float
    exercise: dict[str, float]  # expected minutes per kind
    dashboard_first: float
    dashboard_again: float
    chart: float
    band: float


def _expected(kind: dict) -> float:
    """First attempt + share of learners needing a second x its minutes (+ reading the
    explanation, for a prediction)."""
    return kind["first"] + kind["retry_share"] * kind["retry"] + kind.get("explanation", 0.0)


def load_rates(path: str | Path = DATA) -> Rates:
    """Read a pace file into :class:`Rates`."""
    raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    missing = [k for k in KINDS if k not in raw["exercise"]]
    if missing:
        raise ValueError(f"{path}: no figures for exercise kinds {missing}; it needs {KINDS}")
    return Rates(
        words_per_minute=float(raw["reading"]["words_per_minute"]),
        minutes_per_cell=float(raw["code"]["minutes_per_cell"]),
        seconds_per_line=float(raw["code"]["seconds_per_line"]),
        seconds_per_output_line=float(raw["code"]["seconds_per_output_line"]),
        exercise={k: _expected(raw["exercise"][k]) for k in KINDS},
        dashboard_first=float(raw["dashboard"]["first_use"]),
        dashboard_again=float(raw["dashboard"]["again"]),
        chart=float(raw["chart"]["minutes"]),
        band=float(raw["band"]["relative"]),
    )


@functools.lru_cache(maxsize=1)
def rates() -> Rates:
    """The packaged pacing figures (read once)."""
    return load_rates(DATA)


@dataclass(frozen=True)
class Estimate:
    """A learner's time for one notebook, by activity (minutes)."""

    reading: float
    running: float
    exercises: float
    dashboards: float
    charts: float
    words: int = 0
    code_cells: int = 0
    run_seconds: float = 0.0
    kinds: dict[str, int] = field(default_factory=dict)

    @property
    def minutes(self) -> float:
        return self.reading + self.running + self.exercises + self.dashboards + self.charts


def exercise_kind(ex) -> str:
    """``"puzzle"``, ``"kernel"``, ``"predict"``, ``"numeric"`` or ``"choice"`` for an exercise.

    A kernel puzzle is a :class:`~trnlab.exercises._puzzle.Puzzle` (a small kernel from a
    template); another kernel exercise's reference is a kernel (callable); a prediction is a
    :class:`~trnlab.exercises.Prediction` or asks "Predict ..."; a numeric one checks a number.
    """
    from trnlab.exercises import Prediction
    from trnlab.exercises._puzzle import Puzzle

    if isinstance(ex, Puzzle):
        return "puzzle"

    if isinstance(ex, Prediction) or ex.question.lower().startswith("predict"):
        return "predict"
    if ex.numeric:
        return "numeric"
    return "kernel" if callable(ex.reference()) else "choice"


def _lab_exercise(module: str, name: str):
    return getattr(importlib.import_module(f"trnlab.exercises.{module}"), name)


def _seconds(cell) -> float:
    """A code cell's execution time from nbclient's timestamps (0 when not recorded)."""
    e = cell.get("metadata", {}).get("execution", {})
    if "iopub.execute_input" not in e or "shell.execute_reply" not in e:
        return 0.0
    start = datetime.fromisoformat(e["iopub.execute_input"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(e["shell.execute_reply"].replace("Z", "+00:00"))
    return max((end - start).total_seconds(), 0.0)


def _printed_lines(cell) -> int:
    return sum(
        len(o.get("text", "").splitlines())
        for o in cell.get("outputs", ())
        if o.get("output_type") == "stream"
    )


def _lines(source: str) -> int:
    return sum(1 for line in source.splitlines() if line.strip())


def estimate(nb, dashboards=(), kind_of=None, r: Rates | None = None) -> Estimate:
    """Estimate a learner's minutes for a notebook.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        The notebook (executed, for its run times and charts; unexecuted counts 0 for both).
    dashboards : sequence of str
        Dashboard class names; a code cell calling ``Name(`` explores one.
    kind_of : callable, optional
        ``kind_of(module, attribute) -> kind`` for each ``labNN.attribute.check(`` found in a
        code cell; by default the exercise object's :func:`exercise_kind`.
    r : Rates, optional
        The pacing figures (the packaged ones by default).
    """
    r = r or rates()
    kind_of = kind_of or (lambda module, name: exercise_kind(_lab_exercise(module, name)))
    words = code_cells = lines = printed = charts = 0
    seconds = 0.0
    kinds = dict.fromkeys(KINDS, 0)
    dash_minutes = 0.0
    seen: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            words += len(_WORD.findall(cell.source))
            continue
        if cell.cell_type != "code":
            continue
        code_cells += 1
        lines += _lines(cell.source)
        printed += _printed_lines(cell)
        seconds += _seconds(cell)
        for module, name in _CHECK.findall(cell.source):
            kinds[kind_of(module, name)] += 1
        for d in dashboards:
            if re.search(rf"\b{re.escape(d)}\(", cell.source):
                dash_minutes += r.dashboard_again if d in seen else r.dashboard_first
                seen.add(d)
        if any(_PLOTLY in o.get("data", {}) for o in cell.get("outputs", ())):
            charts += 1
    running = (
        code_cells * r.minutes_per_cell
        + lines * r.seconds_per_line / 60
        + printed * r.seconds_per_output_line / 60
        + seconds / 60
    )
    return Estimate(
        reading=words / r.words_per_minute,
        running=running,
        exercises=sum(n * r.exercise[k] for k, n in kinds.items() if n),
        dashboards=dash_minutes,
        charts=charts * r.chart,
        words=words,
        code_cells=code_cells,
        run_seconds=seconds,
        kinds={k: n for k, n in kinds.items() if n},
    )


def estimate_lab(number: int, labs: str | Path = LABS) -> Estimate:
    """The estimate for a committed lab of the syllabus."""
    lab = syllabus.course_map().lab(number)
    nb = nbformat.read(Path(labs) / lab.file, as_version=4)
    return estimate(nb, dashboards=lab.dashboards)


def table(labs: str | Path = LABS) -> list[dict[str, object]]:
    """One row per lab: stated and model minutes, and the model's breakdown."""
    rows = []
    for lab in syllabus.course_map().labs:
        e = estimate_lab(lab.number, labs)
        rows.append(
            {
                "lab": f"{lab.number:02d}",
                "stated": lab.minutes,
                "model": round(e.minutes),
                "ratio": lab.minutes / e.minutes,
                "reading": e.reading,
                "running": e.running,
                "exercises": e.exercises,
                "dashboards": e.dashboards + e.charts,
                "estimate": e,
            }
        )
    return rows


def text_table(rows) -> str:
    """The table as plain text (what ``python -m trnlab.course pace`` prints)."""
    band = rates().band
    lines = [
        f"{'lab':>3s} {'stated':>6s} {'model':>5s} {'stated/model':>12s}  "
        f"{'reading':>7s} {'running':>7s} {'exercises':>9s} {'dashboards':>10s}  exercises by kind",
    ]
    for row in rows:
        e = row["estimate"]
        flag = "" if abs(row["ratio"] - 1) <= band else "  <- outside the band"
        kinds = ", ".join(f"{n} {k}" for k, n in e.kinds.items())
        lines.append(
            f"{row['lab']:>3s} {row['stated']:6d} {row['model']:5d} {row['ratio']:12.2f}  "
            f"{row['reading']:7.0f} {row['running']:7.0f} {row['exercises']:9.0f} "
            f"{row['dashboards']:10.0f}  {kinds}{flag}"
        )
    stated = sum(row["stated"] for row in rows)
    model = sum(row["estimate"].minutes for row in rows)
    lines += [
        "",
        f"total: stated {stated} min ({syllabus.hours(stated)}), model {model:.0f} min "
        f"({syllabus.hours(round(model))}); band +-{band:.0%}. "
        "dashboards = dashboards explored + charts read. Figures: trnlab/course/data/pace.toml "
        "(assumptions), walkthrough: docs/pacing.md",
    ]
    return "\n".join(lines)


def cli(argv: list[str] | None = None) -> int:
    """``python -m trnlab.course pace [--labs DIR]``: stated vs model minutes per lab."""
    parser = argparse.ArgumentParser(
        prog="python -m trnlab.course pace",
        description="Estimate each lab's time from its notebook and compare it with the syllabus.",
    )
    parser.add_argument(
        "--labs", default=str(LABS), help="folder of executed labs (default: labs/)"
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    print(text_table(table(args.labs)))
    return 0
