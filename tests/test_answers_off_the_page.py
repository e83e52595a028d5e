"""The learner edition never shows an exercise's answer before the learner gives one.

For every exercise cell of every committed learner lab (``labs/*.ipynb``) the scan looks for the
exercise's reference answer, written the ways a page would write it (2 to 4 significant figures,
with or without thousands separators, in the question's unit and with the other prefixes of that
unit, as a percentage for a fraction), in every markdown cell and every output before the
exercise cell, in the exercise cell's own output, and in the lab's publish cell. A pick among
options is scanned for the figures that decide it (the exercise's ``giveaways``). Publish cells
must show nothing readable at all: their bundle is hidden.

The scan itself is tested on planted leaks (a sentence, a table row, a publish cell's text, a
giveaway) so that it cannot pass by finding nothing.
"""

from __future__ import annotations

import copy
import html
import importlib
import math
import re
from pathlib import Path

import nbformat
import pytest

from trnlab.exercises import MIME_TYPE, Exercise
from trnlab.exercises._units import UnitMismatch, decimal_digits, parse_unit

ROOT = Path(__file__).resolve().parents[1]
LABS = sorted((ROOT / "labs").glob("[0-9][0-9]_*.ipynb"))
_CHECK = re.compile(r"^(lab\d\d)\.(\w+)\.check\((\w+)\)\s*$", re.M)
_PUBLISH = "exercises.publish("
#: Whole numbers below this are on every page (2 engines, 4 loads, lab 5): not scanned for.
SMALL = 10
#: Exercises whose answer the page shows before the question on purpose, and why.
BY_DESIGN: dict[str, str] = {}
#: Lines where an exercise's answer appears as another quantity, and what that quantity is.
COINCIDENCES: dict[tuple[str, str], str] = {
    ("lab06.mx_scale", r"^fp8_e[35]m[24]\s+8\s"): "an epsilon and a smallest normal (E5M2, E3M4) "
    "in the format table, not a scale",
    ("lab06.rne_sum", r"start at 1024"): "the starting value, which the question must give; "
    "that the sum never leaves it is the answer",
    ("lab09.min_chips", r"12·L·H·Q·T"): "the 12 of PaLM's attention FLOPs, not a chip count",
    ("lab09.eager_loss_ms", r"ktokens/s"): "a training throughput of section 5's search "
    "(thousands of tokens per second), not the loss's time",
    ("lab10.compute_ratio", r"4\.4x"): "AWS's claim, which the exercise tests; its answer is "
    "what the catalogue's figures give",
    ("lab10.tokens_per_mw", r"the peak 8-bit FLOP"): "the ratio of peak FLOPs per watt, which "
    "the exercise asks the learner to look past (decode is bound by bytes and walks, not FLOPs)",
}


def _coincidence(key: str, text: str, start: int) -> bool:
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", start)
    line = text[line_start : None if line_end < 0 else line_end].strip()
    return any(k == key and re.search(rx, line) for (k, rx) in COINCIDENCES)


_SI = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "": 1.0}
_SMALL_TIME = {"": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}
_BIN = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}
_BASE = {"FLOP/s": "FLOP/s", "FLOP": "FLOP", "B": "B", "B/s": "B/s", "s": "s", "Hz": "Hz"}
_BASE.update({"W": "W", "bit/s": "bit/s"})


def _numbers(value: float) -> set[str]:
    """``value`` at 2, 3 and 4 significant figures, with and without thousands separators."""
    out = set()
    for sig in (2, 3, 4):
        text = decimal_digits(value, sig)
        if "e" in text:
            continue
        if sig == 2 and len(text.replace(".", "").lstrip("0")) < 2:
            continue
        out.add(text)
        out.add(text.replace(",", ""))
        if "." in text:  # 20.80 is also written 20.8
            out.add(text.rstrip("0").rstrip("."))
    if float(value).is_integer():
        out.add(f"{int(value):,}")
        out.add(f"{int(value)}")
    return {t for t in out if t and t not in {"0", "0.0"}}


def answer_forms(ex: Exercise) -> list[re.Pattern]:
    """Patterns a page would use to show ``ex``'s numeric reference answer."""
    r = float(ex.reference())
    forms: set[str] = set()
    if not (float(r).is_integer() and abs(r) < SMALL):
        # 1.008 is also written 1.0, but a bare 1 is on every page, like any small whole number
        forms |= {t for t in _numbers(abs(r)) if not (t.isdigit() and int(t) < SMALL)}
    try:
        unit = parse_unit(ex.unit) if ex.unit else None
    except UnitMismatch:
        unit = None
    with_unit: set[str] = set()
    if unit is not None and unit.kind in _BASE:
        base = r * unit.scale
        prefixes = _SMALL_TIME if unit.kind == "s" else dict(_SI)
        if unit.kind in {"B", "B/s"}:
            prefixes.update(_BIN)
        for p, f in prefixes.items():
            v = abs(base) / f
            if 1 <= v < 1e6:
                for t in _numbers(v) | ({f"{round(v):d}"} if math.isclose(v, round(v)) else set()):
                    with_unit.add(f"{t} {p}{_BASE[unit.kind]}")
                    with_unit.add(f"{t}{p}{_BASE[unit.kind]}")
    if (not ex.unit or ex.unit == "fraction") and 0 < abs(r) < 1:
        for k in (0, 1, 2):
            with_unit.add(f"{abs(r) * 100:.{k}f}%")
    # not part of a longer number or a name: 16 is not in 1,016, 16.5, BF16 or fp16
    pats = [re.compile(rf"(?<![\w.,]){re.escape(f)}(?![\d]|[.,]\d)") for f in forms]
    pats += [re.compile(rf"(?<![\w.,]){re.escape(f)}(?![\w])") for f in with_unit]
    return pats


def _visible(cell) -> str:
    """What a reader sees of a cell: markdown source, or a code cell's outputs as text."""
    if cell.cell_type == "markdown":
        return cell.source
    if cell.cell_type != "code":
        return ""
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        for mime, data in out.get("data", {}).items():
            if mime == MIME_TYPE:
                continue  # the hidden results bundle
            text = data if isinstance(data, str) else "".join(data)
            if mime == "text/html":
                text = html.unescape(re.sub(r"<[^>]+>", " ", text))
            if mime.startswith("text/"):
                parts.append(text)
    return "\n".join(parts)


def _variant_setup(lab: str, nb) -> object:
    """The lab's exercise module, set up for the variant the committed notebook uses."""
    mod = importlib.import_module(f"trnlab.exercises.{lab}")
    if hasattr(mod, "setup"):
        params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
        scope: dict = {}
        exec(params.source, scope)
        names = getattr(mod, "VARIANTS", {})
        mod.setup(**{n.lower(): scope[n] for n in names if n in scope})
    return mod


def leaks(nb, lab: str) -> list[tuple[str, int, str]]:
    """(exercise, cell index, what was found) for every answer the page shows too early."""
    mod = _variant_setup(lab, nb)
    found = []
    publish = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and _PUBLISH in c.source]
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for m in _CHECK.finditer(cell.source):
            ex = getattr(mod, m[2])
            if ex.key in BY_DESIGN:
                continue
            before = [(j, _visible(nb.cells[j])) for j in range(i)]
            pages = before + [(i, _visible(cell))] + [(j, _visible(nb.cells[j])) for j in publish]
            if ex.numeric:
                for pat in answer_forms(ex):
                    for j, text in pages:
                        for hit in pat.finditer(text):
                            if not _coincidence(ex.key, text, hit.start()):
                                found.append(
                                    (ex.key, j, text[max(0, hit.start() - 60) : hit.end() + 20])
                                )
            for give in ex.giveaways:
                for j, text in before + [(j, _visible(nb.cells[j])) for j in publish]:
                    if give in text:
                        found.append((ex.key, j, f"giveaway {give!r}"))
    return found


@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_no_answer_is_on_the_page_before_its_exercise(lab):
    nb = nbformat.read(lab, as_version=4)
    module = f"lab{lab.name[:2]}"
    found = leaks(nb, module)
    assert not found, "\n".join(f"{k}: cell {j}: ...{t}..." for k, j, t in found)


@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_publish_cells_show_nothing_in_the_learner_edition(lab):
    nb = nbformat.read(lab, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and _PUBLISH in c.source]
    assert len(cells) == 1, "one publish cell, the last"
    outputs = cells[0].outputs
    assert any(MIME_TYPE in o.get("data", {}) for o in outputs), "the bundle is there"
    assert _visible(cells[0]).strip() == "", _visible(cells[0])


def _lab(number: str):
    path = next(p for p in LABS if p.name.startswith(number))
    return nbformat.read(path, as_version=4)


def _exercise_cell(nb, name: str) -> int:
    return next(i for i, c in enumerate(nb.cells) if f".{name}.check(" in c.source)


def test_the_scan_finds_a_planted_sentence_table_and_prefix():
    nb = _lab("00")
    i = _exercise_cell(nb, "instance_peak")
    for planted in (
        "AWS prints 20.8 PFLOP/s for this instance.",
        "| trn2.48xlarge | 20,784 TFLOP/s |",
        "a total of 20.78 PF",
    ):
        bad = copy.deepcopy(nb)
        bad.cells.insert(i, nbformat.v4.new_markdown_cell(planted))
        assert any(k == "lab00.instance_peak" for k, _, _ in leaks(bad, "lab00")), planted


def test_the_scan_finds_an_answer_in_an_earlier_output_and_in_the_publish_cell():
    nb = _lab("02")
    i = _exercise_cell(nb, "ridge")
    bad = copy.deepcopy(nb)
    bad.cells[i - 1].outputs = [nbformat.v4.new_output("stream", text="ridge 213.7 FLOP/B\n")]
    bad.cells[i - 1].cell_type = "code"
    assert any(k == "lab02.ridge" for k, _, _ in leaks(bad, "lab02"))
    bad = copy.deepcopy(nb)
    j = next(k for k, c in enumerate(bad.cells) if _PUBLISH in c.source)
    bad.cells[j].outputs = [
        nbformat.v4.new_output("display_data", data={"text/plain": "sbuf tiles: 44"})
    ]
    assert any(k == "lab02.sbuf_tiles" for k, _, _ in leaks(bad, "lab02"))


def test_the_scan_finds_a_fraction_shown_as_a_percentage_and_a_giveaway():
    nb = _lab("07")
    i = _exercise_cell(nb, "kept")
    bad = copy.deepcopy(nb)
    bad.cells.insert(i, nbformat.v4.new_markdown_cell("4:16 keeps 25% of the weights"))
    assert any(k == "lab07.kept" for k, _, _ in leaks(bad, "lab07"))
    i = _exercise_cell(bad, "best_pattern")
    bad.cells.insert(i, nbformat.v4.new_markdown_cell("4:16 loses 42.3% of the energy"))
    assert any(k == "lab07.best_pattern" for k, _, t in leaks(bad, "lab07") if "giveaway" in t)


def test_a_coincidence_is_excused_only_on_its_own_line():
    nb = _lab("06")
    i = _exercise_cell(nb, "rne_sum")
    bad = copy.deepcopy(nb)
    bad.cells.insert(i, nbformat.v4.new_markdown_cell("start at 1024\nand you end at 1,024"))
    hits = [t for k, _, t in leaks(bad, "lab06") if k == "lab06.rne_sum"]
    assert len(hits) == 1 and "end at 1,024" in hits[0]


def test_the_scan_leaves_other_numbers_alone():
    # a page full of figures that are not the answer does not trip it
    nb = _lab("00")
    i = _exercise_cell(nb, "instance_peak")
    ok = copy.deepcopy(nb)
    ok.cells.insert(
        i, nbformat.v4.new_markdown_cell("1,299 TFLOP/s per chip; 16 chips; 20.9; 120.8")
    )
    assert not [k for k, _, _ in leaks(ok, "lab00") if k == "lab00.instance_peak"]
