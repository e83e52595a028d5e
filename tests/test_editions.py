"""The instructor edition is generated from the learner labs and must never drift from them."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import pytest

from trnlab.course import editions
from trnlab.course.__main__ import main

ROOT = Path(__file__).resolve().parents[1]
LABS = ROOT / "labs"
INSTRUCTOR = ROOT / "instructor"


def test_committed_instructor_edition_matches_the_learner_labs():
    drift = editions.check(LABS, INSTRUCTOR)
    assert not drift, "regenerate with: python -m trnlab.course editions\n" + "\n".join(
        map(str, drift)
    )


def _code(nb) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "code"]


@pytest.mark.parametrize("lab", sorted(LABS.glob(editions.LAB_GLOB)), ids=lambda p: p.stem)
def test_every_learner_stub_has_a_solution_and_nothing_else_changes(lab):
    learner = nbformat.read(lab, as_version=4)
    teacher = nbformat.read(INSTRUCTOR / lab.name, as_version=4)
    stubs = [s for s in _code(learner) if re.search(r"^\w+ = None\b", s, re.M) and ".check(" in s]
    assert len(stubs) >= 3
    # Same cells in the same order, plus one header; only exercise cells differ.
    assert len(teacher.cells) == len(learner.cells) + 1
    assert teacher.cells[0].id == editions.HEADER_ID
    assert "Instructor edition" in teacher.cells[0].source
    changed = 0
    for a, b in zip(learner.cells, teacher.cells[1:], strict=True):
        assert a.cell_type == b.cell_type
        if a.source != b.source:
            changed += 1
            assert a in [c for c in learner.cells if c.source in stubs]
            assert "# Solution (instructor edition):" in b.source
            assert not re.search(r"^\w+ = None\b", b.source, re.M), "stub left unanswered"
    assert changed == len(stubs)
    for c in teacher.cells:
        if c.cell_type == "code":
            assert c.outputs == [] and c.execution_count is None


def test_a_kernel_answer_is_shown_as_source_not_hidden_in_a_call():
    nb = nbformat.read(INSTRUCTOR / "05_write_a_kernel.ipynb", as_version=4)
    text = "\n".join(_code(nb))
    # an NKI kernel: its decorator and the modules it uses come with it, so the cell runs
    assert "@nki.jit\ndef reference_tiled(a_t, b):" in text
    assert "import trnlab.nki as nki" in text and "import trnlab.nki.isa as nisa" in text
    assert "my_matmul = reference_tiled" in text


def _copy(tmp_path: Path) -> tuple[Path, Path]:
    labs, out = tmp_path / "labs", tmp_path / "instructor"
    labs.mkdir()
    shutil.copy(LABS / "02_inside_a_neuroncore.ipynb", labs)
    editions.regenerate(labs, out)
    return labs, out


def test_editing_the_learner_lab_without_regenerating_is_drift(tmp_path):
    labs, out = _copy(tmp_path)
    assert editions.check(labs, out) == []
    lab = labs / "02_inside_a_neuroncore.ipynb"
    nb = nbformat.read(lab, as_version=4)
    nb.cells[-1].source += "\nprint('an edit')"
    nbformat.write(nb, lab)
    drift = editions.check(labs, out)
    assert [d.path.name for d in drift] == [lab.name]
    assert main(["editions", "--labs", str(labs), "--out", str(out), "--check"]) == 1
    assert main(["editions", "--labs", str(labs), "--out", str(out)]) == 0
    assert editions.check(labs, out) == []


def test_hand_edits_to_the_instructor_edition_and_orphans_are_drift(tmp_path):
    labs, out = _copy(tmp_path)
    target = out / "02_inside_a_neuroncore.ipynb"
    target.write_text(target.read_text().replace("reference()", "reference() * 1"))
    (out / "99_orphan.ipynb").write_text(target.read_text())
    reasons = {d.path.name: d.reason for d in editions.check(labs, out)}
    assert set(reasons) == {"02_inside_a_neuroncore.ipynb", "99_orphan.ipynb"}
    editions.regenerate(labs, out)
    assert not (out / "99_orphan.ipynb").exists()


def test_a_stub_the_generator_cannot_read_is_a_teaching_error(tmp_path):
    labs = tmp_path / "labs"
    labs.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("answer = 3\nlab01.clock.check(answer)")]
    nbformat.write(nb, labs / "01_x.ipynb")
    with pytest.raises(editions.EditionError, match=r"answer = None"):
        editions.regenerate(labs, tmp_path / "out")
    nb.cells = [nbformat.v4.new_code_cell("answer = None\nlab01.nope.check(answer)")]
    nbformat.write(nb, labs / "01_x.ipynb")
    with pytest.raises(editions.EditionError, match=r"no exercise 'nope'.*clock"):
        editions.regenerate(labs, tmp_path / "out")
