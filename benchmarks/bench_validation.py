"""Validation against published runs: writes docs/validation.md and reports the errors.

Every collective, training and decode case of trnlab's published-run tables is run through the
model; the figures are the mean absolute error by group, the count within 20% and the time the
whole table takes. ``python -m benchmarks validation`` regenerates the page.
"""

from __future__ import annotations

import time
from pathlib import Path

from trnlab.scale import _validation as V

PAGE = Path(__file__).resolve().parents[1] / "docs" / "validation.md"


def run() -> dict:
    t0 = time.perf_counter()
    rows = V.validation_rows()
    elapsed = time.perf_counter() - t0
    PAGE.write_text(V.validation_markdown(rows), encoding="utf-8")
    val = [r for r in rows if r.role == "validation"]
    out = {
        "cases": len(val),
        "within_20_percent": sum(r.within for r in val),
        "mean_absolute_error": round(V.mean_absolute_error(rows), 4),
        "table_s": round(elapsed, 3),
    }
    for group in ("collectives", "training", "decode"):
        out[f"mae_{group}"] = round(V.mean_absolute_error(rows, group), 4)
    out["worst"] = sorted(
        ((r.key, round(r.ratio, 3)) for r in val if not r.within), key=lambda kv: abs(kv[1] - 1)
    )[-5:]
    return out
