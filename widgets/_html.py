"""Small HTML pieces the dashboards share (tables beside the charts)."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

__all__ = ["table"]


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], note: str = "") -> str:
    """An HTML table of ``rows`` under ``headers`` (text escaped), with an optional note below.

    An empty ``rows`` gives an empty string, so a view can hide the table by passing none.
    """
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in row) + "</tr>"
        for row in rows
    )
    if not body:
        return ""
    head = "".join(f"<th style='text-align:left'>{html.escape(h)}</th>" for h in headers)
    tail = f"<p><i>{html.escape(note)}</i></p>" if note else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{tail}"
