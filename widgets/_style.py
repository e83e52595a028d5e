"""Shared look of the dashboards: a colour-blind-safe palette, markers, and the layout base.

Colours are Okabe-Ito (safe for the common colour-vision deficiencies); every series is also
told apart by marker symbol or dash, never by colour alone.
"""

from __future__ import annotations

OKABE_ITO = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#F0E442",  # yellow
    "#000000",  # black
)
#: Greys and white for context that is not a series to tell apart (the data histogram, idle
#: links, reference terms, node fills): no hue, so they read the same for everyone.
NEUTRALS = ("#FFFFFF", "#CCCCCC", "#BBBBBB", "#999999")
#: The one sequential scale (heatmaps, colour-mapped load): cividis, readable with every common
#: colour-vision deficiency and in greyscale; these are its steps where a view needs bins.
SEQUENTIAL = "cividis"
CIVIDIS_STEPS = ("#00224E", "#434E6C", "#7D7C78", "#BCAF6F", "#FEE838")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "cross", "x", "star", "hexagon")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def colour(i: int) -> str:
    return OKABE_ITO[i % len(OKABE_ITO)]


def symbol(i: int) -> str:
    return SYMBOLS[i % len(SYMBOLS)]


def base_layout(title: str = "", height: int = 420) -> dict:
    """Layout defaults: white template, readable fonts, room for long labels."""
    return {
        "title": {"text": title, "x": 0.01},
        "template": "plotly_white",
        "height": height,
        "margin": {"l": 70, "r": 20, "t": 50, "b": 90},
        "font": {"size": 13},
        "hoverlabel": {"align": "left"},
    }
