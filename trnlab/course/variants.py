"""Per-student variants of a lab: the same notebook, a different chip, shape or format each.

A lab whose exercises have variants declares them in its exercise module
(``trnlab.exercises.labNN.VARIANTS``: notebook parameter -> allowed values), and its setup
cell rebuilds those exercises from the parameters. This module picks, for every student on a
roster, one value per parameter, deterministically from ``(seed, student)``, and writes one
notebook per student: the learner lab with the choice injected by papermill (not executed,
outputs cleared), plus a manifest of who got what (JSON and CSV).

    python -m trnlab.course variants labs/01_trainium_family.ipynb --roster roster.txt \\
        --seed 7 --out variants/

The same seed and roster always give the same variants, so the manifest can be regenerated;
:mod:`trnlab.course.grading` re-runs each submission with its own parameters.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import random
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat

from .submissions import roster_entries, slug

__all__ = [
    "choose_variant",
    "exercise_module",
    "make_variants",
    "read_roster",
    "variant_space",
]

KERNEL = "trnlab"
MANIFEST_JSON = "manifest.json"
MANIFEST_CSV = "manifest.csv"


def exercise_module(lab: str | Path) -> ModuleType:
    """The exercise module of a lab notebook (``labs/01_*.ipynb`` -> ``trnlab.exercises.lab01``)."""
    stem = Path(lab).stem
    number = stem[:2]
    if not number.isdigit():
        raise ValueError(
            f"{Path(lab).name} is not a course lab: lab notebooks are named NN_title.ipynb "
            "(labs/01_trainium_family.ipynb)"
        )
    try:
        return importlib.import_module(f"trnlab.exercises.lab{number}")
    except ModuleNotFoundError:
        raise ValueError(
            f"{Path(lab).name}: there is no trnlab.exercises.lab{number} module for its exercises"
        ) from None


def variant_space(lab: str | Path) -> dict[str, list[Any]]:
    """The lab's declared variant space: notebook parameter -> allowed values.

    Raises
    ------
    ValueError
        If the lab's exercises have no variants.
    """
    module = exercise_module(lab)
    space = getattr(module, "VARIANTS", None)
    if not space:
        labs = sorted(
            p.name
            for p in Path(lab).resolve().parent.glob("[0-9][0-9]_*.ipynb")
            if getattr(exercise_module(p), "VARIANTS", None)
        )
        raise ValueError(
            f"{Path(lab).name} has no per-student variants ({module.__name__} declares no "
            f"VARIANTS). Labs with variants: {', '.join(labs) or 'none'}."
        )
    return {name: list(values) for name, values in space.items()}


def _restrict(space: Mapping[str, list[Any]], choose: Mapping[str, Any] | None) -> dict:
    """The space narrowed by ``choose`` (parameter -> one allowed value or a list of them)."""
    out = {name: list(values) for name, values in space.items()}
    for name, wanted in (choose or {}).items():
        if name not in space:
            raise ValueError(
                f"{name!r} is not a variant parameter of this lab; its variant parameters are "
                f"{', '.join(space)}"
            )
        wanted = list(wanted) if isinstance(wanted, list | tuple | set) else [wanted]
        bad = [w for w in wanted if w not in space[name]]
        if bad or not wanted:
            raise ValueError(
                f"{name} cannot be {', '.join(map(repr, bad)) or 'nothing'}: the lab's exercises "
                f"exist for {', '.join(map(repr, space[name]))}"
            )
        out[name] = [v for v in space[name] if v in wanted]  # declared order, not the caller's
    return out


def choose_variant(
    space: Mapping[str, Sequence[Any]], seed: int | str, student: str
) -> dict[str, Any]:
    """One value per parameter, drawn from ``random.Random(f"{seed}:{student}")``.

    The draw depends only on the seed, the student's name and the space (in its declared
    order), so re-running with the same roster and seed reproduces every variant, and adding
    a student to the roster does not change anyone else's.
    """
    rng = random.Random(f"{seed}:{student}")
    return {name: rng.choice(list(values)) for name, values in space.items()}


def read_roster(path: str | Path) -> list[str]:
    """Students from a roster file: one name (or id) per line; blank lines and ``#`` comments
    are skipped. Raises ValueError on duplicates or an empty roster."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    students = [ln.split("#", 1)[0].strip() for ln in lines]
    return _check_students([s for s in students if s], str(path))


def _check_students(students: Iterable[str], where: str) -> list[str]:
    """The students, or ValueError naming the first unusable one (the grader reports them all
    and goes on: :func:`trnlab.course.submissions.roster_entries`)."""
    names, problems = roster_entries(enumerate((str(s) for s in students), 1))
    if problems:
        raise ValueError(f"{where}: {problems[0].split(': ', 1)[1]}")
    if not names:
        raise ValueError(f"{where}: no students (one name per line)")
    return names


def _parameters_cell_names(nb: nbformat.NotebookNode) -> set[str]:
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            return set(re.findall(r"^([A-Za-z_]\w*)\s*=", cell.source, flags=re.M))
    return set()


def make_variants(
    lab: str | Path,
    students: Iterable[str],
    seed: int | str,
    out_dir: str | Path,
    choose: Mapping[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """Write one notebook per student, each with its own variant of the lab's exercises.

    Parameters
    ----------
    lab : path
        The learner lab (``labs/01_trainium_family.ipynb``).
    students : iterable of str
        Names or ids, unique; each becomes the ``STUDENT`` parameter and part of a file name.
    seed : int or str
        With the student's name, decides the variant (same seed, same variants).
    out_dir : path
        Created if needed; receives ``<lab>__<student>.ipynb`` per student, ``manifest.json``
        and ``manifest.csv``.
    choose : mapping, optional
        Narrows the space: parameter -> one value, or a list of values to draw from
        (``{"CLOCK_CHIP": ["trn1", "trn3"]}``); every value must be in the declared space.

    Returns
    -------
    dict
        The manifest: student -> the variant parameters injected into their notebook.
    """
    import papermill as pm

    lab = Path(lab)
    students = _check_students(students, "students")
    space = _restrict(variant_space(lab), choose)
    learner = nbformat.read(lab, as_version=4)
    missing = set(space) - _parameters_cell_names(learner)
    if missing:
        raise ValueError(
            f"{lab.name}'s parameters cell does not define {', '.join(sorted(missing))}: add "
            "them there with the committed values, so the lab runs without the variants tool"
        )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, dict[str, Any]] = {}
    rows = []
    for student in students:
        params = choose_variant(space, seed, student)
        target = out / f"{lab.stem}__{slug(student)}.ipynb"
        pm.execute_notebook(
            str(lab),
            str(target),
            parameters={**params, "STUDENT": student},
            prepare_only=True,
            kernel_name=KERNEL,
            progress_bar=False,
        )
        _clear_outputs(target)
        manifest[student] = params
        rows.append({"student": student, "file": target.name, **params})
    (out / MANIFEST_JSON).write_text(
        json.dumps(
            {
                "lab": lab.name,
                "seed": seed,
                "space": space,
                "students": {r["student"]: r for r in rows},
            },
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )
    with open(out / MANIFEST_CSV, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["student", "file", *space])
        writer.writeheader()
        writer.writerows(rows)
    return manifest


def _clear_outputs(path: Path) -> None:
    """A learner's copy starts clean: the committed lab's outputs belong to the default variant."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nbformat.write(nb, path)


def _parse_choose(items: Sequence[str], space: Mapping[str, list[Any]]) -> dict[str, list[Any]]:
    """``["CLOCK_CHIP=trn1,trn3", "M=256"]`` -> values of the declared types."""
    out: dict[str, list[Any]] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or name not in space:
            raise ValueError(
                f"--choose {item!r}: write NAME=VALUE[,VALUE...] with NAME one of "
                f"{', '.join(space)}"
            )
        by_text = {str(v): v for v in space[name]}
        values = []
        for token in text.split(","):
            if token.strip() not in by_text:
                raise ValueError(
                    f"--choose {name}: {token.strip()!r} is not allowed; choose from "
                    f"{', '.join(by_text)}"
                )
            values.append(by_text[token.strip()])
        out[name] = values
    return out


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trnlab.course variants",
        description="Write one notebook per student, each with its own variant of the lab's "
        "exercises (chosen from a seed), and a manifest of who got what.",
    )
    parser.add_argument("lab", help="the learner lab, e.g. labs/01_trainium_family.ipynb")
    parser.add_argument("--roster", help="file with one student name or id per line")
    parser.add_argument("--seed", default="0", help="same seed + roster = same variants")
    parser.add_argument("--out", default="variants", help="folder for the notebooks")
    parser.add_argument(
        "--choose",
        action="append",
        default=[],
        metavar="NAME=V1,V2",
        help="draw NAME only from these values (repeatable)",
    )
    parser.add_argument(
        "--list", action="store_true", help="print the lab's variant space and exit"
    )
    args = parser.parse_args(argv)
    try:
        space = variant_space(args.lab)
        if args.list:
            for name, values in space.items():
                print(f"{name}: {', '.join(map(str, values))}")
            return 0
        if not args.roster:
            parser.error("--roster is required (one student per line)")
        seed: int | str = int(args.seed) if args.seed.lstrip("-").isdigit() else args.seed
        manifest = make_variants(
            args.lab,
            read_roster(args.roster),
            seed,
            args.out,
            choose=_parse_choose(args.choose, space),
        )
    except (ValueError, OSError) as err:
        print(f"variants: {err}", file=sys.stderr)
        return 2
    width = max(len(s) for s in manifest)
    for student, params in manifest.items():
        print(f"{student:<{width}}  " + "  ".join(f"{k}={v}" for k, v in params.items()))
    print(f"{len(manifest)} notebooks and {MANIFEST_JSON}/{MANIFEST_CSV} in {args.out}")
    return 0
