"""How close the NeuronCore model is to published hardware measurements.

``run()`` (``python -m benchmarks fidelity``) returns the mean absolute error of the calibration
facts and of the validation cases, the counts within tolerance, and every row's ratio.
``python -m benchmarks.bench_fidelity --write`` regenerates ``docs/fidelity.md`` from the same
rows (``tests/test_fidelity.py`` fails when the page and the model disagree).
"""

from __future__ import annotations

import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "fidelity.md"


def run() -> dict:
    from trnlab.kernels import fidelity

    rows = fidelity.table()
    out = fidelity.summary(rows)
    out["rows"] = {
        f"{r.group}.{r.id}": {
            "published": r.published,
            "model": round(r.model, 12),
            "ratio": round(r.ratio, 4),
            "within": r.within,
        }
        for r in rows
    }
    return out


def write(path: Path = DOC) -> str:
    from trnlab.kernels import fidelity

    text = fidelity.markdown()
    path.write_text(text)
    return text


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        write()
        print(f"wrote {DOC}")
    else:
        import json

        print(json.dumps(run(), indent=2))
