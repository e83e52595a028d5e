"""Who handed in what: rosters and variant manifests read strictly, files matched to students.

The grader never takes a student's identity from inside a notebook (its metadata is the
student's to edit). A submission's student comes from its file name, matched against the
roster or the variants manifest when one is given:

- ``<lab>__<student>.ipynb`` (the name the variants tool gives each student's copy) or
  ``<student>.ipynb``, where ``<student>`` is the name as the variants tool spells it in file
  names (:func:`slug`); a longer name ending in ``__<student>.ipynb`` also matches (learning
  platforms often prefix a submission id);
- with a manifest, a file named exactly as the manifest assigned it;
- with neither, the student is the part of the name after its last ``__`` (or the whole stem).

Rows that are wrong (a duplicate, a name with no usable characters, a variant value outside the
lab's declared space, a missing file name) are *reported* and skipped: they never become
students.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "Roster",
    "RosterError",
    "Student",
    "lab_name",
    "read_manifest",
    "read_roster",
    "roster_entries",
    "slug",
    "student_from_filename",
]

_LAB_FILE = re.compile(r"(\d\d)_[^/\\]*\.ipynb")
_LAB = re.compile(r"lab(\d\d)")
_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.ipynb")


class RosterError(ValueError):
    """A roster or manifest that cannot be used at all (unreadable, wrong shape)."""


def slug(student: str) -> str:
    """A student's name as it appears in file names (``"Ada Lovelace"`` -> ``Ada_Lovelace``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", student.strip()).strip("._") or "student"


@dataclass(frozen=True)
class Student:
    """One student: name, the file assigned to them (manifest), their variant parameters."""

    name: str
    file: str | None = None
    variant: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Roster:
    """The students of a roster or manifest, the lab (manifest), and the rows that were skipped."""

    source: str
    students: tuple[Student, ...]
    lab: str | None = None
    problems: tuple[str, ...] = ()

    def match(self, filename: str) -> Student | None:
        """The student a submitted file belongs to, or None."""
        name = Path(filename).name
        stem = Path(filename).stem
        for s in self.students:
            if s.file is not None and name == s.file:
                return s
        found = [
            s for s in self.students if stem == slug(s.name) or stem.endswith("__" + slug(s.name))
        ]
        return found[0] if len(found) == 1 else None


def student_from_filename(filename: str) -> str:
    """The student of a file when there is no roster: after the last ``__``, else the stem."""
    stem = Path(filename).stem
    return stem.rsplit("__", 1)[1] if "__" in stem and stem.rsplit("__", 1)[1] else stem


def lab_name(lab: str | Path) -> str:
    """``"lab01"`` from ``lab01``, ``01``, ``01_trainium_family.ipynb`` or a path to it.

    Raises
    ------
    ValueError
        If ``lab`` names no course lab this way.
    """
    text = str(lab).strip()
    name = Path(text).name
    for pattern, value in ((_LAB, text), (re.compile(r"(\d\d)"), text), (_LAB_FILE, name)):
        m = pattern.fullmatch(value)
        if m:
            return f"lab{m.group(1)}"
    raise ValueError(
        f"{text!r} is not a course lab: give labNN (lab01) or the lab's notebook "
        "(labs/01_trainium_family.ipynb)"
    )


def _name_problem(name: str, seen: dict[str, str]) -> str | None:
    """Why ``name`` cannot be a student (no usable characters, clashes with an earlier one)."""
    if not any(c.isalnum() for c in name):
        return f"{name!r} has no letters or digits to name a file by"
    if any(ord(c) < 32 for c in name):
        return f"{name!r} holds control characters"
    key = slug(name)
    if key in seen:
        return (
            f"{name!r} and {seen[key]!r} would get the same notebook file ({key}); make the "
            "names unique"
        )
    seen[key] = name
    return None


def roster_entries(names: Iterable[tuple[int, str]]) -> tuple[list[str], list[str]]:
    """Students from ``(line number, name)`` pairs, and a problem for each unusable one.

    A name with no usable characters, or one that would share a file name with an earlier
    one, is a problem (reported), not a student.
    """
    students: list[str] = []
    problems: list[str] = []
    seen: dict[str, str] = {}
    for line, name in names:
        problem = _name_problem(name, seen)
        if problem:
            problems.append(f"line {line}: {problem}")
        else:
            students.append(name)
    return students, problems


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise RosterError(f"cannot read {path}: {err}") from None


def read_roster(path: str | Path) -> Roster:
    """A roster file: one name or id per line; blank lines and ``# comments`` skipped."""
    path = Path(path)
    pairs = []
    for n, line in enumerate(_lines(path), 1):
        name = line.split("#", 1)[0].strip()
        if name:
            pairs.append((n, name))
    names, problems = roster_entries(pairs)
    if not names:
        raise RosterError(f"{path}: no students (one name per line)")
    return Roster(str(path), tuple(Student(s) for s in names), None, tuple(problems))


def _variant_space(lab: str) -> dict[str, list[Any]]:
    import importlib

    try:
        module = importlib.import_module(f"trnlab.exercises.{lab}")
    except ModuleNotFoundError:
        raise RosterError(f"there are no exercises for {lab}") from None
    return {k: list(v) for k, v in (getattr(module, "VARIANTS", None) or {}).items()}


def _check_entry(
    lab: str, space: Mapping[str, list], name: Any, entry: Any, where: str
) -> tuple[Student | None, str | None]:
    from trnlab.exercises._variants import check_variant

    if not isinstance(name, str) or not name.strip():
        return None, f"{where}: the student's name is missing"
    if not isinstance(entry, Mapping):
        return None, f"{where}: expected an object with a file and the variant"
    file = entry.get("file")
    if not isinstance(file, str) or not _FILE.fullmatch(file):
        return None, (f"{where}: 'file' must be a notebook file name (no folders), not {file!r}")
    variant = {}
    for key, value in entry.items():
        if key in ("student", "file"):
            continue
        if key not in space:
            return None, (
                f"{where}: {key!r} is not a variant parameter of {lab} "
                f"({', '.join(space) or 'it has none'})"
            )
        try:
            variant[key] = check_variant(lab, key, value, space)
        except ValueError as err:
            return None, f"{where}: {err}"
    missing = set(space) - set(variant)
    if missing:
        return None, f"{where}: no value for {', '.join(sorted(missing))}"
    return Student(name.strip(), file, variant), None


def read_manifest(path: str | Path) -> Roster:
    """The manifest the variants tool wrote (``manifest.json``, or its ``manifest.csv``).

    The whole file must have the manifest's shape (else :class:`RosterError`); a student
    entry that is wrong (missing file, unknown parameter, value outside the lab's declared
    variant space, duplicate name or file) is reported in ``problems`` and skipped. Values
    are checked against the lab's own ``VARIANTS``, not the manifest's copy of the space.
    """
    path = Path(path)
    text = "\n".join(_lines(path))
    if path.suffix.lower() == ".csv":
        rows = list(csv.DictReader(text.splitlines()))
        if not rows or "student" not in rows[0] or "file" not in rows[0]:
            raise RosterError(
                f"{path}: a manifest.csv has the columns student, file, then the variant"
            )
        try:  # the variants tool names files NN_title__student.ipynb
            lab = lab_name(str(rows[0]["file"]).split("__", 1)[0] + ".ipynb")
        except ValueError:
            raise RosterError(
                f"{path}: cannot tell the lab from the file {rows[0]['file']!r} "
                "(the variants tool writes NN_title__student.ipynb)"
            ) from None
        space = _variant_space(lab)
        entries = [
            (f"row {i} ({r.get('student')!r})", r.get("student"), _typed(r, space))
            for i, r in enumerate(rows, 2)
        ]
    else:
        try:
            data = json.loads(text)
        except ValueError as err:
            raise RosterError(f"{path} is not JSON: {err}") from None
        if not isinstance(data, dict) or not isinstance(data.get("students"), dict):
            raise RosterError(
                f"{path}: not a variants manifest (an object with 'lab' and 'students'); "
                "write one with python -m trnlab.course variants"
            )
        try:
            lab = lab_name(str(data.get("lab", "")))
        except ValueError as err:
            raise RosterError(f"{path}: 'lab': {err}") from None
        entries = [(f"student {k!r}", k, v) for k, v in data["students"].items()]
    space = _variant_space(lab)
    students: list[Student] = []
    problems: list[str] = []
    files: dict[str, str] = {}
    seen: dict[str, str] = {}
    for where, name, entry in entries:
        student, problem = _check_entry(lab, space, name, entry, where)
        if student is not None:
            clash = _name_problem(student.name, seen)
            if clash:
                student, problem = None, f"{where}: {clash}"
            elif student.file in files:
                student, problem = (
                    None,
                    f"{where}: file {student.file} is already {files[student.file]!r}'s",
                )
        if student is None:
            problems.append(problem)
            continue
        files[student.file] = student.name
        students.append(student)
    if not students:
        raise RosterError(f"{path}: no usable student entries ({'; '.join(problems) or 'none'})")
    return Roster(str(path), tuple(students), lab, tuple(problems))


def _typed(row: Mapping[str, str], space: Mapping[str, list]) -> dict[str, Any]:
    """A manifest.csv row with its variant values back in their declared types."""
    out: dict[str, Any] = {}
    for key, text in row.items():
        if key is None:
            out["?"] = text  # more cells than columns: reported as an unknown parameter
            continue
        by_text = {str(v): v for v in space.get(key, [])}
        out[key] = by_text.get(text, text) if key in space else text
    return out
