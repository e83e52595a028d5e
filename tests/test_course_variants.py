"""Per-student variants: the exercises' answers depend on the variant, the tool's choices are
deterministic and inside the declared space, and a variant notebook runs and checks.

Expected answers are closed forms written here, not taken from the exercise modules.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import papermill as pm
import pytest

from trnlab.course import variants
from trnlab.exercises import lab01, lab03, lab06, read_published

ROOT = Path(__file__).resolve().parents[1]
LAB01 = ROOT / "labs" / "01_trainium_family.ipynb"
LAB03 = ROOT / "labs" / "03_tiled_matmul.ipynb"
LAB06 = ROOT / "labs" / "06_numeric_formats.ipynb"
ROSTER = [f"student{i:02d}" for i in range(12)] + ["Ada Lovelace", "grace.hopper"]

# Dense BF16 chip rating / (cores x 128 x 128 PEs x 2 FLOP per MAC), in GHz.
CLOCK_GHZ = {
    "trn1": 190e12 / (2 * 128 * 128 * 2) / 1e9,
    "trn2": 667e12 / (8 * 128 * 128 * 2) / 1e9,
    "trn3": 671e12 / (8 * 128 * 128 * 2) / 1e9,
}
# (2 - 2^-mantissa bits) x 2^(largest exponent field - bias); E4M3FN keeps its top exponent
# for numbers but loses the all-ones mantissa to NaN: 1.75 x 2^8.
MAX_FINITE = {
    "fp8_e5m2": 1.75 * 2**15,
    "fp8_e4m3": 1.875 * 2**7,
    "fp8_e4m3fn": 1.75 * 2**8,
    "fp8_e3m4": 1.9375 * 2**3,
    "fp16": 65504.0,
    "bf16": (2 - 2**-7) * 2.0**127,
}
# 2^(floor(log2 100) - emax of the element): emax = floor(log2(element max)).
MX_SCALE_100 = {
    "mxfp8_e4m3": 2.0 ** (6 - 8),  # max 448
    "mxfp8_e5m2": 2.0 ** (6 - 15),  # max 57344
    "mxfp6_e3m2": 2.0 ** (6 - 4),  # max 28
    "mxfp6_e2m3": 2.0 ** (6 - 2),  # max 7.5
    "mxfp4": 2.0 ** (6 - 2),  # max 6
}


def _tiled(m: int, k: int, n: int) -> tuple[int, int]:
    """(loads of each A tile, HBM bytes) of the tiled kernel: A once per 512-wide N tile,
    B once per 128-tall M tile, C stored once, bf16."""
    return n // 512, 2 * (m * k * (n // 512) + k * n * (m // 128) + m * n)


@pytest.fixture(autouse=True)
def _default_variants():
    yield
    lab01.setup()
    lab03.setup()
    lab06.setup()


def test_each_lab_declares_its_variant_space_with_the_committed_values_as_defaults():
    assert variants.variant_space(LAB01) == {"CLOCK_CHIP": ["trn1", "trn2", "trn3"]}
    assert set(variants.variant_space(LAB03)) == {"M", "K", "N"}
    assert set(variants.variant_space(LAB06)) == {"MAX_FORMAT", "MX_FORMAT"}
    assert set(MAX_FINITE) == set(lab06.VARIANTS["MAX_FORMAT"])
    assert set(MX_SCALE_100) == set(lab06.VARIANTS["MX_FORMAT"])
    for module in (lab01, lab03, lab06):
        for name, value in module.DEFAULTS.items():
            assert value in module.VARIANTS[name]
    with pytest.raises(ValueError, match="no per-student variants"):
        variants.variant_space(ROOT / "labs" / "02_inside_a_neuroncore.ipynb")


@pytest.mark.parametrize("chip", ["trn1", "trn2", "trn3"])
def test_clock_exercise_follows_its_chip(chip):
    lab01.setup(clock_chip=chip)
    assert lab01.clock.reference() == pytest.approx(CLOCK_GHZ[chip], rel=1e-9)
    assert lab01.clock.check(CLOCK_GHZ[chip]).status == "passed"
    assert f"{CLOCK_GHZ[chip]:.3g}"[:3] in lab01.clock.solution()
    for other, ghz in CLOCK_GHZ.items():
        if other != chip:
            assert lab01.clock.check(ghz).status == "failed", (chip, other)


@pytest.mark.parametrize(
    "m,k,n", [(256, 512, 1024), (128, 256, 1536), (512, 1024, 2048), (384, 768, 1024)]
)
def test_matmul_exercises_follow_their_shape(m, k, n):
    lab03.setup(m=m, k=k, n=n)
    reloads, nbytes = _tiled(m, k, n)
    assert (
        f"A[{m} x {k}]" in lab03.reloads.question and f"B[{k} x {n}]" in lab03.tiled_bytes.question
    )
    assert lab03.reloads.check(reloads).status == "passed"
    assert lab03.tiled_bytes.check(nbytes).status == "passed"
    assert lab03.tiled_bytes.reference() == nbytes
    other = (512, 1024, 2048) if (m, k, n) != (512, 1024, 2048) else (128, 256, 1024)
    assert lab03.tiled_bytes.check(_tiled(*other)[1]).status == "failed"


@pytest.mark.parametrize("fmt", sorted(MAX_FINITE))
def test_largest_value_exercise_follows_its_format(fmt):
    lab06.setup(max_format=fmt)
    assert lab06.max_finite.reference() == MAX_FINITE[fmt]
    assert lab06.max_finite.check(MAX_FINITE[fmt]).status == "passed"
    for other, value in MAX_FINITE.items():
        if value != MAX_FINITE[fmt]:
            assert lab06.max_finite.check(value).status == "failed", (fmt, other)


@pytest.mark.parametrize("fmt", sorted(MX_SCALE_100))
def test_mx_scale_exercise_follows_its_format(fmt):
    lab06.setup(mx_format=fmt)
    assert lab06.mx_scale.reference() == MX_SCALE_100[fmt]
    assert lab06.mx_scale.check(MX_SCALE_100[fmt]).status == "passed"
    assert lab06.mx_scale.check(0.25 if MX_SCALE_100[fmt] != 0.25 else 16.0).status == "failed"


def test_unknown_variant_values_are_refused_with_what_is_allowed():
    with pytest.raises(ValueError, match=r"CLOCK_CHIP = 'trn4'.*'trn1', 'trn2', 'trn3'"):
        lab01.setup(clock_chip="trn4")
    with pytest.raises(ValueError, match=r"M = 200 .*128, 256, 384, 512"):
        lab03.setup(m=200)
    with pytest.raises(ValueError, match=r"M = '256'"):
        lab03.setup(m="256")  # a string is not the shape 256
    with pytest.raises(ValueError, match=r"MAX_FORMAT = 'fp7'.*'fp8_e5m2'"):
        lab06.setup(max_format="fp7")


def test_choices_are_deterministic_in_the_space_and_differ_across_students_and_seeds():
    space = variants.variant_space(LAB03)
    a = {s: variants.choose_variant(space, 7, s) for s in ROSTER}
    assert a == {s: variants.choose_variant(space, 7, s) for s in ROSTER}
    assert all(v[name] in space[name] for v in a.values() for name in space)
    assert len({tuple(v.values()) for v in a.values()}) > 5, "students get different variants"
    b = {s: variants.choose_variant(space, 8, s) for s in ROSTER}
    assert a != b, "another seed gives other variants"
    # Adding a student changes nobody else's variant.
    assert variants.choose_variant(space, 7, "student03") == a["student03"]


def test_make_variants_writes_one_parameterised_notebook_per_student(tmp_path):
    manifest = variants.make_variants(LAB06, ROSTER[:4], seed=3, out_dir=tmp_path)
    again = variants.make_variants(LAB06, ROSTER[:4], seed=3, out_dir=tmp_path / "again")
    assert manifest == again
    assert list(manifest) == ROSTER[:4]
    written = json.loads((tmp_path / "manifest.json").read_text())
    assert written["seed"] == 3 and written["lab"] == LAB06.name
    csv_lines = (tmp_path / "manifest.csv").read_text().splitlines()
    assert csv_lines[0] == "student,file,MAX_FORMAT,MX_FORMAT" and len(csv_lines) == 5
    for student, params in manifest.items():
        assert params["MAX_FORMAT"] in lab06.VARIANTS["MAX_FORMAT"]
        assert params["MX_FORMAT"] in lab06.VARIANTS["MX_FORMAT"]
        nb = nbformat.read(tmp_path / written["students"][student]["file"], as_version=4)
        assert nb.metadata.papermill.parameters == {**params, "STUDENT": student}
        injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
        assert len(injected) == 1
        assert f'MAX_FORMAT = "{params["MAX_FORMAT"]}"' in injected[0].source
        assert f'STUDENT = "{student}"' in injected[0].source
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(not c.outputs and c.execution_count is None for c in code), "not executed"


def test_choose_narrows_the_space_and_refuses_values_outside_it(tmp_path):
    manifest = variants.make_variants(
        LAB01, ROSTER, seed=1, out_dir=tmp_path, choose={"CLOCK_CHIP": ["trn1", "trn3"]}
    )
    assert {p["CLOCK_CHIP"] for p in manifest.values()} == {"trn1", "trn3"}
    with pytest.raises(ValueError, match="exist for 'trn1', 'trn2', 'trn3'"):
        variants.make_variants(LAB01, ROSTER, 1, tmp_path, choose={"CLOCK_CHIP": "h100"})
    with pytest.raises(ValueError, match="same notebook file"):
        variants.make_variants(LAB01, ["a b", "a_b"], 1, tmp_path)


def test_cli_writes_the_variants_and_reports_errors(tmp_path, capsys):
    roster = tmp_path / "roster.txt"
    roster.write_text("# section A\nalice\n\nbob  # late joiner\n")
    out = tmp_path / "out"
    argv = [str(LAB01), "--roster", str(roster), "--seed", "7", "--out", str(out)]
    assert variants.cli([*argv, "--choose", "CLOCK_CHIP=trn1"]) == 0
    assert sorted(p.name for p in out.glob("*.ipynb")) == [
        "01_trainium_family__alice.ipynb",
        "01_trainium_family__bob.ipynb",
    ]
    assert "alice  CLOCK_CHIP=trn1" in capsys.readouterr().out
    assert variants.cli([*argv, "--choose", "CLOCK_CHIP=trn9"]) == 2
    assert "'trn9' is not allowed; choose from trn1, trn2, trn3" in capsys.readouterr().err
    assert variants.cli([str(LAB03), "--list"]) == 0
    assert "N: 1024, 1536, 2048" in capsys.readouterr().out


def _execute(nb_path: Path, out: Path, **overrides) -> dict:
    """Run a variant notebook as the grader does: its own parameters, plus ``overrides``."""
    own = nbformat.read(nb_path, as_version=4).metadata.papermill.parameters
    pm.execute_notebook(
        str(nb_path),
        str(out),
        parameters={
            **own,
            "CHIPS": ["trn1", "trn2", "trn3"],
            "COMPARE_WITH": ["h100"],
            **overrides,
        },
        kernel_name="trnlab",
        cwd=str(out.parent),
        progress_bar=False,
        store_widget_state=False,
    )
    return read_published(out)


@pytest.mark.notebook
def test_a_variant_notebook_passes_in_solutions_mode_and_fails_another_variants_answer(tmp_path):
    variants.make_variants(LAB01, ["ada"], 5, tmp_path, choose={"CLOCK_CHIP": "trn1"})
    path = tmp_path / "01_trainium_family__ada.ipynb"

    bundle = _execute(path, tmp_path / "solved.ipynb", SOLUTIONS=True, STRICT=True)
    assert set(bundle["exercises"].values()) == {"passed"}, bundle["exercises"]
    solved = nbformat.read(tmp_path / "solved.ipynb", as_version=4)
    question = next(c for c in solved.cells if "lab01.clock.question" in c.source)
    assert "Trainium is rated at 190 dense BF16 TFLOPS" in question.outputs[0]["text"]

    # The default variant's (Trainium2's) answer is wrong for this student's Trainium.
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if "lab01.clock.check(" in c.source)
    cell.source = re.sub(
        r"^clock_ghz = None.*$", f"clock_ghz = {CLOCK_GHZ['trn2']!r}", cell.source, flags=re.M
    )
    nbformat.write(nb, tmp_path / "answered.ipynb")
    bundle = _execute(
        tmp_path / "answered.ipynb", tmp_path / "graded.ipynb", SOLUTIONS=False, STRICT=False
    )
    assert bundle["exercises"]["lab01.clock"] == "failed"
    assert "too low" in bundle["messages"]["lab01.clock"]
