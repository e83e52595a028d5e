"""Every committed lab output holding a plotly figure (MIME application/vnd.plotly.v1+json)
has a text summary beside it: text in the same cell's outputs (a printed line, a table, a
sentence), or a markdown cell right after the figure's cell.

The committed labs are executed, so this reads their saved outputs (re-run a lab with
``make labs`` after changing it).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
PLOTLY = "application/vnd.plotly.v1+json"
LABS = sorted((ROOT / "labs").glob("[0-9][0-9]_*.ipynb"))


def _words(text: str) -> int:
    return len(re.findall(r"[A-Za-z]{2,}", re.sub(r"<[^>]+>", " ", text)))


def _is_text(out) -> bool:
    """A text output a reader can use as the chart's summary (not the figure's own repr)."""
    if out.output_type == "stream":
        return out.name == "stdout" and _words(out.text) >= 3
    data = out.get("data", {})
    if PLOTLY in data:
        return False
    for mime in ("text/markdown", "text/html", "text/plain"):
        if mime in data:
            text = data[mime] if isinstance(data[mime], str) else "".join(data[mime])
            if mime == "text/plain" and re.match(r"^\s*(Figure|FigureWidget)\(", text):
                continue
            if _words(text) >= 3:
                return True
    return False


def missing_summaries(path: Path) -> list[int]:
    """Indices (0-based, all cells counted) of code cells with a figure and no summary."""
    nb = nbformat.read(path, as_version=4)
    bad = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        outs = cell.get("outputs", [])
        if not any(PLOTLY in o.get("data", {}) for o in outs):
            continue
        beside = any(_is_text(o) for o in outs)
        after = i + 1 < len(nb.cells) and nb.cells[i + 1].cell_type == "markdown"
        if not (beside or after):
            bad.append(i)
    return bad


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.stem)
def test_every_chart_in_a_lab_has_a_text_summary_beside_it(lab):
    bad = missing_summaries(lab)
    assert not bad, f"{lab.name}: cells {bad} show a chart with no text summary beside it"
