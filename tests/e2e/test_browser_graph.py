"""The dependency graph in a real browser: ``graph.svg`` opened directly takes its embedded
stylesheet (its CSP allows exactly that) in both schemes, and the picture framed as pages frame
it fits its box without script (it used to scroll sideways, its far end out of sight: SPEC § 9
now asks that the graph fit its box) and passes axe, experimental rules included, light and dark,
wide and at 375 px."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.template.loader import render_to_string

from tracker.graph.plan_graph import GraphNode, PlanGraph
from tracker.graph.svg import graph_context

# What a page shows and does, the same in both modes: the embedded mode runs it (tests/conftest.py).
pytestmark = [pytest.mark.browser, pytest.mark.pages]

STATIC = Path(__file__).resolve().parents[2] / "tracker" / "static" / "tracker"
RUN_OPTIONS = {
    "resultTypes": ["violations"],
    "runOnly": {
        "type": "tag",
        "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice", "experimental"],
    },
}
STATES = ("draft", "ready", "in_progress", "in_review", "done", "cancelled")


@pytest.mark.parametrize(
    ("scheme", "background"), [("light", "rgb(255, 255, 255)"), ("dark", "rgb(30, 33, 39)")]
)
def test_the_graph_opened_directly_is_styled(
    browser: Any, server: Any, signed_in: str, scheme: str, background: str
):
    context = browser.new_context(base_url=server.url, storage_state=signed_in, color_scheme=scheme)
    tab = context.new_page()
    refused: list[str] = []
    tab.on("console", lambda message: refused.append(message.text) if message.type == "error" else None)
    try:
        response = tab.goto("/projects/DEMO/graph.svg")
        assert response is not None
        assert response.status == 200
        fill = tab.evaluate("getComputedStyle(document.querySelector('.graph-bg')).fill")
        assert fill == background
        boxes = tab.evaluate(
            "[...document.querySelectorAll('.node .box')].map(b => getComputedStyle(b).fill)"
        )
        assert boxes
        assert "rgb(0, 0, 0)" not in boxes  # SVG's default: the stylesheet did not apply
        assert tab.locator("a").count() > 0
    finally:
        context.close()
    assert refused == []


# axe does not judge text inside an SVG, so the picture's colours are measured here (WCAG 2.x).
COLOURS = """() => {
  const fill = (e) => getComputedStyle(e).fill;
  const background = fill(document.querySelector('.graph-bg'));
  const texts = [...document.querySelectorAll('.graph text, .graph tspan')].map((t) => {
    const node = t.closest('.node');
    return [t.textContent, fill(t), node ? fill(node.querySelector('.box')) : background];
  });
  const lines = [...document.querySelectorAll('.graph .edge, .graph .box, .graph .halo')].map(
    (e) => [e.getAttribute('class'), getComputedStyle(e).stroke, background]);
  return {texts, lines};
}"""


def luminance(colour: str) -> float:
    channels = [int(value) / 255 for value in re.findall(r"\d+", colour)[:3]]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(one: str, other: str) -> float:
    light, dark = sorted((luminance(one), luminance(other)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def poor_contrast(tab: Any) -> list[tuple[str, float]]:
    """Texts under 4.5:1 on their box, and lines and borders under 3:1 on the picture's ground."""
    measured = tab.evaluate(COLOURS)
    assert measured["texts"]
    poor = [(text, contrast(fg, bg)) for text, fg, bg in measured["texts"] if contrast(fg, bg) < 4.5]
    poor += [(name, contrast(fg, bg)) for name, fg, bg in measured["lines"] if contrast(fg, bg) < 3]
    return poor


def sample() -> PlanGraph:
    nodes = [
        GraphNode(
            key=f"DEMO-{n}",
            title=f"Ticket {n} </svg><script>alert(1)</script> & more words than fit",
            state=STATES[n % len(STATES)],
            runnable=n % 4 == 1,
            claimed_by="demo" if n % 5 == 0 else "",
            new=n == 13,
        )
        for n in range(1, 25)
    ]
    edges = (*tuple((f"DEMO-{n}", f"DEMO-{n + 1}") for n in range(1, 12)), ("DEMO-2", "DEMO-9"))
    return PlanGraph(nodes=tuple(nodes), edges=edges, chain=tuple(f"DEMO-{n}" for n in range(1, 13)))


def framed() -> str:
    context = graph_context(
        sample(),
        href=lambda node: None if node.new else f"/projects/DEMO/items/{node.key}/",
        title="Dependency graph of DEMO",
        label="Dependency graph",
    )
    partial = re.sub(r"<link [^>]*>", "", render_to_string("tracker/_graph.html", context))
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Graph</title></head>'
        f"<body><main><h1>The plan</h1>{partial}</main></body></html>"
    )


@pytest.mark.parametrize(
    ("scheme", "width"), [("light", 1280), ("light", 375), ("dark", 1280), ("dark", 375)]
)
def test_the_framed_graph_fits_and_is_accessible(browser: Any, scheme: str, width: int):
    context = browser.new_context(viewport={"width": width, "height": 800}, color_scheme=scheme)
    tab = context.new_page()
    try:
        tab.set_content(framed())
        for sheet in ("ballet.css", "graph.css"):
            tab.add_style_tag(content=(STATIC / sheet).read_text(encoding="utf-8"))
        assert tab.locator("script").count() == 0
        region = tab.get_by_role("region", name="Dependency graph")
        # Without script the whole picture shows: scaled to the region's width, nothing past it.
        assert region.evaluate("r => r.scrollWidth <= r.clientWidth + 1")
        box = region.evaluate(
            "r => { const a = r.getBoundingClientRect(), b = r.querySelector('svg').getBoundingClientRect();"
            " return [b.left >= a.left - 1, b.right <= a.right + 1, b.width > 0]; }"
        )
        assert box == [True, True, True]
        assert tab.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert poor_contrast(tab) == []
        results = Axe().run(tab, options=RUN_OPTIONS)
        failing = [v for v in results.response["violations"] if v["impact"] in ("serious", "critical")]
        assert failing == [], results.generate_report()
    finally:
        context.close()
