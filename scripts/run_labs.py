"""Execute the committed labs in place, top to bottom, and strip widget state.

Course notebooks are committed executed (so nbval can check their key outputs) and without
ipywidgets state (megabytes of JSON nobody reads). Run after editing a lab:

    .venv/bin/python scripts/run_labs.py            # every lab
    .venv/bin/python scripts/run_labs.py labs/01_trainium_family.ipynb
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

KERNEL = "trnlab"
ROOT = Path(__file__).resolve().parents[1]


def strip_widget_state(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop saved widget state and widget views, which only a live kernel can use."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("widgets", None)
        for out in cell.get("outputs", []):
            out.get("data", {}).pop("application/vnd.jupyter.widget-view+json", None)
    nb.metadata["kernelspec"] = {
        "name": KERNEL,
        "display_name": "Python (trnlab)",
        "language": "python",
    }
    return nb


def run(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    t0 = time.perf_counter()
    NotebookClient(
        nb,
        kernel_name=KERNEL,
        timeout=600,
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=False,
    ).execute()
    nbformat.write(strip_widget_state(nb), path)
    return time.perf_counter() - t0


def main(argv: list[str]) -> int:
    # A progress line appears only when a run is slow on this machine: never commit one.
    os.environ["TRNLAB_PROGRESS"] = "0"
    paths = [Path(a) for a in argv] or sorted((ROOT / "labs").glob("[0-9][0-9]_*.ipynb"))
    for p in paths:
        print(f"{p.name}: {run(p):.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
