"""Publish a lab's key results so tests (and graders) can read them from the executed notebook.

A lab calls :func:`publish` with its key numbers; the values are recorded as a JSON bundle
under trnlab's own MIME type (hidden in the learner edition: they are the exercises' answers),
and the test harness and the grader read that bundle out of the executed notebook.
"""

from __future__ import annotations

import json
from typing import Any

from ._exercise import results, settings

__all__ = ["MIME_TYPE", "publish", "read_published"]

MIME_TYPE = "application/vnd.trnlab.results+json"


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def publish(lab: str, **values: Any) -> dict[str, Any]:
    """Record ``values`` and the status of every exercise checked so far, for tests to read.

    The bundle holds ``"lab"``, ``"values"``, ``"exercises"`` (key -> status) and
    ``"messages"`` (key -> what the check said, e.g. what is wrong; graders copy it into
    their CSV). It is displayed under trnlab's own MIME type, which notebook front ends do
    not draw: in the learner edition the cell shows nothing, since the values it records are
    answers to the lab's exercises. With solutions on (the instructor edition) a readable list
    is shown beside it. Returns the published dictionary.
    """
    checked = results()
    bundle = {
        "lab": lab,
        "values": _jsonable(values),
        "exercises": {k: r.status for k, r in checked.items()},
        "messages": {k: r.message for k, r in checked.items()},
    }
    try:
        from IPython.display import display
    except ImportError:  # outside IPython: nothing to display
        return bundle
    text = ""
    if settings()["solutions"]:
        lines = [f"{k}: {v}" for k, v in bundle["values"].items()]
        lines += [f"exercise {k}: {s}" for k, s in bundle["exercises"].items()]
        text = "\n".join(lines)
    # An empty text/plain keeps front ends that cannot draw the bundle from complaining.
    display({MIME_TYPE: bundle, "text/plain": text}, raw=True)
    return bundle


def read_published(notebook: Any) -> dict[str, Any]:
    """The bundle a lab published, read from an executed notebook (path or nbformat node).

    Raises
    ------
    LookupError
        If the notebook published nothing (the lab's last cell did not run).
    """
    if not hasattr(notebook, "cells"):
        import nbformat

        notebook = nbformat.read(str(notebook), as_version=4)
    found = None
    for cell in notebook.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if MIME_TYPE in data:
                raw = data[MIME_TYPE]
                found = json.loads(raw) if isinstance(raw, str) else raw
    if found is None:
        raise LookupError("the notebook published no trnlab results (did its last cell run?)")
    return found
