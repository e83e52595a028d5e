"""Small HTML pieces the dashboards share (tables beside the charts)."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from html.parser import HTMLParser

__all__ = ["table", "text_of"]


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


class _Text(HTMLParser):
    """Collects the text of an HTML fragment: cells joined by " | ", blocks on new lines."""

    BLOCKS = frozenset({"p", "tr", "br", "div", "pre", "table", "li", "summary", "h1", "h2", "h3"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        if tag in ("td", "th") and self.parts and not self.parts[-1].endswith("\n"):
            self.parts.append(" | ")
        elif tag == "br":
            self.parts.append("\n")

    def handle_endtag(self, tag) -> None:
        if tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data) -> None:
        self.parts.append(data)


def text_of(fragment: str) -> str:
    """Plain text of an HTML fragment (the dashboards' summaries and tables), one block a line."""
    parser = _Text()
    parser.feed(fragment or "")
    parser.close()
    lines = (re.sub(r"[ \t]+", " ", line).strip(" |") for line in "".join(parser.parts).split("\n"))
    return "\n".join(line for line in lines if line)
