"""The dashboards' static fallback: inline SVG of each figure plus the text summary, carried
in the display bundle beside the live widget view, and shown by an HTML export."""

from __future__ import annotations

import importlib.util
import itertools
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nbclient import NotebookClient
from nbconvert import HTMLExporter

from trnlab import kernels
from trnlab.widgets import (
    ChipExplorer,
    CollectiveExplorer,
    FormatExplorer,
    KernelProfile,
    MatmulStepper,
    ScaleExplorer,
)
from trnlab.widgets._static import DASH, PATTERN, _marker_path, figure_svg

ROOT = Path(__file__).resolve().parents[1]
SVG = "{http://www.w3.org/2000/svg}"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
NUMERIC_ATTRS = ("x", "y", "width", "height", "d", "transform", "viewBox", "stroke-width")

BUILDERS = {
    "ChipExplorer": lambda: ChipExplorer(),
    "ChipExplorer scatter": lambda: ChipExplorer(chart="scatter", x_metric="hbm_bandwidth"),
    "FormatExplorer": lambda: FormatExplorer(),
    "MatmulStepper": lambda: MatmulStepper(m=256, k=256, n=512).set(position=9),
    "KernelProfile": lambda: KernelProfile(
        kernels.matmul((256, 256), (256, 512), numerics=False), position=12
    ),
    "CollectiveExplorer": lambda: CollectiveExplorer(),
    "ScaleExplorer": lambda: ScaleExplorer(),
}


@pytest.fixture(scope="module", params=list(BUILDERS))
def dash(request):
    return BUILDERS[request.param]()


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def _traces(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if g.get("class") == "trace"]


def _defs(root: ET.Element) -> dict[str, ET.Element]:
    return {e.get("id"): e for e in root.iter() if e.get("id")}


def _finite_attrs(root: ET.Element) -> None:
    for el in root.iter():
        for name in NUMERIC_ATTRS:
            value = el.get(name)
            if value is None:
                continue
            assert not re.search(r"nan|inf", value, re.I), (el.tag, name, value)
            for num in re.findall(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", value):
                assert math.isfinite(float(num)), (el.tag, name, value)


# The bundle ------------------------------------------------------------------------------------
def test_the_bundle_keeps_the_widget_view_and_adds_a_static_picture(dash):
    bundle = dash._repr_mimebundle_()
    assert WIDGET_VIEW in bundle  # live front ends still show the live widget
    assert bundle["text/plain"] == dash.summary_text() and bundle["text/plain"].strip()
    page = bundle["text/html"]
    assert page.count("<svg") == len(dash.figures()) > 0
    assert (
        "<script" not in page
        and "plotly" not in page.lower()
        and "http" not in page.replace("http://www.w3.org/2000/svg", "")
    )
    first_line = bundle["text/plain"].splitlines()[0]
    assert first_line[:40] in re.sub(r"<[^>]+>", "", page).replace("&amp;", "&")


def test_include_and_exclude_are_honoured(dash):
    only = dash._repr_mimebundle_(include=["text/plain"])
    assert "text/plain" in only and "text/html" not in only and WIDGET_VIEW in only
    assert "text/html" not in dash._repr_mimebundle_(exclude=["text/html"])


def test_each_figure_is_an_accessible_svg_with_one_series_per_visible_trace(dash):
    for fig in dash.figures():
        root = _parse(figure_svg(fig))
        assert root.get("role") == "img"
        ids = root.get("aria-labelledby").split()
        found = _defs(root)
        assert all(i in found and (found[i].text or "").strip() for i in ids)
        assert root.find(f"{SVG}title").text.strip()
        visible = [t for t in fig.data if t.visible is None or t.visible is True]
        assert len(_traces(root)) == len(visible)
        _finite_attrs(root)


def test_the_fallback_is_small_and_quick(dash):
    import time

    t0 = time.perf_counter()
    page = dash.static_html()
    elapsed = time.perf_counter() - t0
    assert len(page.encode()) < 150_000, len(page.encode())
    assert elapsed < 5.0  # generous: a shared CI machine; benchmarks hold the real figure


# The renderer on figures built for the purpose ------------------------------------------------
def _fig(*traces, **layout):
    return {"data": list(traces), "layout": layout}


def test_scatter_series_carry_their_colour_dash_and_marker():
    svg = figure_svg(
        _fig(
            {"type": "scatter", "name": "a", "x": [1, 2, 3], "y": [1, 4, 9], "mode": "lines",
             "line": {"color": "#0072B2", "dash": "dash"}},
            {"type": "scatter", "name": "b", "x": [1, 2, 3], "y": [2, 3, 4],
             "mode": "lines+markers", "line": {"color": "#E69F00", "dash": "dot"},
             "marker": {"symbol": "diamond", "size": 10, "color": "#E69F00"}},
            {"type": "scatter", "name": "c", "x": [1, 2], "y": [5, 6], "mode": "markers",
             "marker": {"symbol": "circle-open", "size": 8, "color": "#009E73"}},
            {"type": "scatter", "name": "hidden", "x": [1], "y": [1], "visible": False},
        )
    )  # fmt: skip
    root = _parse(svg)
    traces = {g.get("data-name"): g for g in _traces(root)}
    assert set(traces) == {"a", "b", "c"}
    defs = _defs(root)
    a = traces["a"].find(f"{SVG}path")
    assert a.get("stroke") == "#0072B2" and a.get("stroke-dasharray") == DASH["dash"]
    b_line = traces["b"].find(f"{SVG}path")
    assert b_line.get("stroke") == "#E69F00" and b_line.get("stroke-dasharray") == DASH["dot"]
    uses = traces["b"].findall(f"{SVG}use")
    assert len(uses) == 3 and all(u.get("fill") == "#E69F00" for u in uses)
    assert defs[uses[0].get("href")[1:]].get("d") == _marker_path("diamond", 10)[0]
    c = traces["c"].findall(f"{SVG}use")
    assert c[0].get("fill") == "none" and c[0].get("stroke") == "#009E73"  # open symbol
    # The legend repeats each series' look: its line dash and its marker.
    legend = [g for g in root.iter(f"{SVG}g") if (g.get("transform") or "").startswith("trans")]
    assert len(legend) == 3
    assert any(p.get("stroke-dasharray") == DASH["dot"] for p in legend[1].iter(f"{SVG}path"))


def test_bars_grouped_stacked_horizontal_and_patterned():
    cats = ["p", "q"]
    grouped = _parse(
        figure_svg(
            _fig(
                {"type": "bar", "name": "u", "x": cats, "y": [1, 2], "marker": {"color": "#0072B2"}},
                {"type": "bar", "name": "v", "x": cats, "y": [3, 4],
                 "marker": {"color": "#E69F00", "pattern": {"shape": "/"}}},
            )
        )
    )  # fmt: skip
    u, v = _traces(grouped)
    assert u.find(f"{SVG}path").get("fill") == "#0072B2"
    fill = v.find(f"{SVG}path").get("fill")
    pattern = _defs(grouped)[fill[5:-1]]
    assert pattern.tag == f"{SVG}pattern" and pattern.find(f"{SVG}path").get("d") == PATTERN["/"]
    # Grouped: side by side, so the two traces' bars do not overlap in x.
    ux = [float(n) for n in re.findall(r"M([\d.]+),", u.find(f"{SVG}path").get("d"))]
    vx = [float(n) for n in re.findall(r"M([\d.]+),", v.find(f"{SVG}path").get("d"))]
    assert ux[0] < vx[0] and ux[1] < vx[1]

    def tops(svg):
        root = _parse(svg)
        return [min(float(y) for y in re.findall(r"M[\d.]+,([\d.]+)", g.find(f"{SVG}path").get("d")))
                for g in _traces(root)]  # fmt: skip

    stacked = figure_svg(
        _fig({"type": "bar", "name": "u", "x": ["p"], "y": [1]},
             {"type": "bar", "name": "v", "x": ["p"], "y": [1]}, barmode="stack")
    )  # fmt: skip
    top_u, top_v = tops(stacked)
    assert top_v < top_u  # v sits on u
    horiz = _parse(figure_svg(_fig({"type": "bar", "orientation": "h", "y": ["a", "b"],
                                    "x": [2, 4], "base": [1, 0]})))  # fmt: skip
    (g,) = _traces(horiz)
    widths = [float(w) for w in re.findall(r"h([\d.]+)v", g.find(f"{SVG}path").get("d"))]
    assert widths[0] == pytest.approx(widths[1] / 2, rel=0.02)


def test_log_axes_space_decades_evenly_and_drop_non_positive_values():
    root = _parse(
        figure_svg(
            _fig({"type": "scatter", "mode": "markers", "x": [1, 10, 100, 1000, 0, -5],
                  "y": [1, 2, 3, 4, 5, 6]}, xaxis={"type": "log"})
        )
    )  # fmt: skip
    xs = [float(u.get("x")) for u in _traces(root)[0].findall(f"{SVG}use")]
    assert len(xs) == 4  # 0 and -5 have no place on a log axis
    gaps = [b - a for a, b in itertools.pairwise(xs)]
    assert max(gaps) - min(gaps) < 0.3
    labels = {t.text for t in root.iter(f"{SVG}text")}
    assert {"10", "100", "1k"} <= labels


def test_heatmap_shapes_and_annotations_are_drawn():
    root = _parse(
        figure_svg(
            _fig({"type": "heatmap", "z": [[0, 1], [2, 3]], "colorscale": "cividis"},
                 shapes=[{"type": "line", "xref": "x", "yref": "paper", "x0": 0.5, "x1": 0.5,
                          "y0": 0, "y1": 1, "line": {"color": "#D55E00", "dash": "dash"}}],
                 annotations=[{"text": "note", "xref": "paper", "yref": "paper", "x": 0.5,
                               "y": 1, "showarrow": False}])
        )
    )  # fmt: skip
    (heat,) = _traces(root)
    fills = {p.get("fill") for p in heat.iter(f"{SVG}path")}
    assert len(fills) == 4 and "#00224E" in fills  # cividis, lowest value
    assert any(p.get("stroke") == "#D55E00" and p.get("stroke-dasharray") for p in root.iter(f"{SVG}path"))  # fmt: skip
    assert "note" in {t.text for t in root.iter(f"{SVG}text")}


def test_text_is_escaped():
    evil = '<script>alert("x")</script> & <b>bold</b>'
    svg = figure_svg(
        _fig({"type": "scatter", "name": evil, "x": [1, 2], "y": [1, 2], "text": [evil, "ok"],
              "mode": "markers+text"},
             {"type": "bar", "name": "b&c", "x": ["<i>"], "y": [1]}, title={"text": evil})
    )  # fmt: skip
    assert "<script" not in svg
    root = _parse(svg)
    texts = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert 'alert("x")' in texts and "b&c" in texts


finite = st.floats(allow_nan=False, allow_infinity=False)
maybe = st.one_of(finite, st.none())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    xs=st.lists(maybe, min_size=0, max_size=30),
    ys=st.lists(maybe, min_size=0, max_size=30),
    kind=st.sampled_from(["lines", "markers", "lines+markers", "bar", "barh"]),
    xlog=st.booleans(),
    ylog=st.booleans(),
)
def test_random_finite_data_never_gives_nan_or_inf_coordinates(xs, ys, kind, xlog, ylog):
    if kind.startswith("bar"):
        trace = {"type": "bar", "x": xs, "y": ys, "orientation": "h" if kind == "barh" else "v"}
    else:
        trace = {"type": "scatter", "mode": kind, "x": xs, "y": ys,
                 "marker": {"symbol": "diamond"}, "line": {"dash": "dot"}}  # fmt: skip
    fig = _fig(trace, {**trace, "name": "two"}, xaxis={"type": "log" if xlog else "linear"},
               yaxis={"type": "log" if ylog else "linear"})  # fmt: skip
    root = _parse(figure_svg(fig))
    _finite_attrs(root)
    assert len(_traces(root)) == 2


@settings(max_examples=25, deadline=None)
@given(z=st.lists(st.lists(finite, min_size=3, max_size=3), min_size=1, max_size=5))
def test_random_heatmaps_never_give_nan_or_inf(z):
    _finite_attrs(_parse(figure_svg(_fig({"type": "heatmap", "z": z}))))


# The HTML export -----------------------------------------------------------------------------
def _strip_widget_state():
    spec = importlib.util.spec_from_file_location("run_labs", ROOT / "scripts" / "run_labs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.strip_widget_state


@pytest.mark.notebook
def test_an_html_export_without_widget_state_shows_each_dashboard_statically(tmp_path):
    setup = (
        "from trnlab import kernels\n"
        "from trnlab.widgets import ChipExplorer, CollectiveExplorer, FormatExplorer, "
        "KernelProfile, MatmulStepper, ScaleExplorer"
    )
    shows = [
        "ChipExplorer()",
        "FormatExplorer()",
        "MatmulStepper(m=256, k=256, n=512).set(position=5)",
        "KernelProfile(kernels.matmul((256, 256), (256, 256), numerics=False))",
        "CollectiveExplorer()",
        "ScaleExplorer()",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(setup)] + [nbformat.v4.new_code_cell(s) for s in shows]
    NotebookClient(nb, kernel_name="trnlab", timeout=600, store_widget_state=False,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()  # fmt: skip
    nb = _strip_widget_state()(nb)
    body, _ = HTMLExporter().from_notebook_node(nb)
    # The exporter re-serialises HTML (attribute order and case), so compare what it shows.
    shown = BeautifulSoup(body, "html.parser").find_all("div", class_="trnlab-static")
    assert len(shown) == len(shows)
    for cell, show, static in zip(nb.cells[1:], shows, shown, strict=True):
        (out,) = [o for o in cell.outputs if o.output_type == "execute_result"]
        assert WIDGET_VIEW not in out.data
        page, plain = out.data["text/html"], out.data["text/plain"]
        assert static["aria-label"].startswith(show.split("(")[0]), show
        assert len(static.find_all("svg")) == page.count("<svg") > 0, show
        assert all(svg.find("title").get_text().strip() for svg in static.find_all("svg"))
        text = " ".join(static.get_text(" ").split())
        for line in plain.splitlines()[:3]:
            assert " ".join(line.replace(" | ", " ").split())[:60] in text, (show, line)
