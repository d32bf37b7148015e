"""The dependency graph as a picture: a server-rendered SVG, and the same graph as a list.

Tickets are boxes coloured by state (classes only: the pages' CSP forbids inline styles, the
colours live in ``tracker/static/tracker/graph.css``), runnable ones marked with a thick
border and a "▶", resolved ones faded, the longest remaining chain highlighted, new ones (a
changeset would create them) dashed; each box links to its ticket where it has a page. Every
text in it is someone's and is escaped (docs/trust.md). Past ``MAX_NODES`` tickets the
picture keeps the unresolved ones and the resolved ones next to them, and says how many it
left out. The layout is ``tracker.graph.layout``'s.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from django.utils.safestring import SafeString, mark_safe

from tracker.graph.layout import BOX_HEIGHT, BOX_WIDTH, MARGIN, SECTION_GAP, Layout, Point, layout
from tracker.graph.plan_graph import GraphNode, PlanGraph
from tracker.models import Project
from tracker.models.plan import RESOLVED_STATES
from tracker.page_links import item_url

MAX_NODES = 400
TITLE_CHARS = 25  # of a title in its box (the whole title is in the box's tooltip)
HOLDER_CHARS = 20
KEY_CHARS = 18
CSS = Path(__file__).resolve().parent.parent / "static" / "tracker" / "graph.css"
# Characters XML does not allow at all: the standalone document must stay well-formed.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")

Href = Callable[[GraphNode], str | None]


def item_href(project: Project) -> Href:
    """Links to the ticket pages of ``project``: none for a ticket that does not exist yet."""

    def href(node: GraphNode) -> str | None:
        return None if node.new else item_url(project.key, node.key)

    return href


def _text(value: str) -> str:
    return html.escape(_NOT_XML.sub("\ufffd", value))


def _short(value: str, limit: int) -> str:
    value = " ".join(value.split())
    return value if len(value) <= limit else value[: limit - 1].rstrip() + "…"


def _state_word(state: str) -> str:
    return state.replace("_", " ")


def shown(graph: PlanGraph) -> tuple[PlanGraph, int]:
    """The graph the picture draws, and how many tickets it left out: all of them up to
    ``MAX_NODES``; past that, the chain, then the unresolved tickets, then the resolved ones
    next to an unresolved one, in that order of priority, up to ``MAX_NODES``."""
    if len(graph.nodes) <= MAX_NODES:
        return graph, 0
    unresolved = {node.key for node in graph.nodes if node.state not in RESOLVED_STATES}
    near = {a for a, b in graph.edges if b in unresolved} | {b for a, b in graph.edges if a in unresolved}
    by_key = {node.key: node for node in graph.nodes}
    wanted = [key for key in graph.chain if key in by_key]
    wanted += [node.key for node in graph.nodes if node.key in unresolved]
    wanted += [node.key for node in graph.nodes if node.key in near]
    kept = set(list(dict.fromkeys(wanted))[:MAX_NODES])
    nodes = tuple(node for node in graph.nodes if node.key in kept)
    edges = tuple((a, b) for a, b in graph.edges if a in kept and b in kept)
    chain = tuple(key for key in graph.chain if key in kept)
    return PlanGraph(nodes=nodes, edges=edges, chain=chain), len(graph.nodes) - len(nodes)


def caption(graph: PlanGraph, left_out: int) -> str:
    """What the picture shows, in one sentence (its visible caption and its ``<desc>``)."""
    count = len(graph.nodes)
    edges = len(graph.edges)
    parts = [f"{count} ticket{'s' * (count != 1)}, {edges} dependenc{'y' if edges == 1 else 'ies'}"]
    if graph.chain:
        parts.append(f"the longest remaining chain of blockers has {len(graph.chain)} tickets")
    if left_out:
        parts.append(f"{left_out} resolved or far-off tickets left out")
    return "; ".join(parts) + "."


def accessible_name(node: GraphNode, *, on_chain: bool) -> str:
    """The box's tooltip: key, whole title and every mark."""
    marks = [_state_word(node.state)]
    if node.runnable:
        marks.append("runnable")
    if on_chain:
        marks.append("on the longest remaining chain")
    if node.claimed_by:
        marks.append(f"claimed by {node.claimed_by}")
    if node.new:
        marks.append("new")
    return f"{node.key}: {node.title} ({', '.join(marks)})"


def link_name(node: GraphNode, *, on_chain: bool) -> str:
    """The box's link's name for a screen reader: its visible text, in the order the box holds
    it (key, state, holder, title), then what the picture says only by its marks. The visible
    text comes first and whole so that the name contains it (WCAG 2.5.3, axe's
    ``label-content-name-mismatch``): the title comes last among the visible texts because the box
    shows only its start, and the whole title in the name still begins with it."""
    said = [_short(node.key, KEY_CHARS), _state_word(node.state)]
    if node.claimed_by:
        said.append(f"held by {_short(node.claimed_by, HOLDER_CHARS)}")
    marks = []
    if node.runnable:
        marks.append("runnable")
    if on_chain:
        marks.append("on the longest remaining chain")
    if node.new:
        marks.append("new")
    name = f"{', '.join(said)}: {' '.join(node.title.split())}"
    return f"{name} ({', '.join(marks)})" if marks else name


Edge = tuple[str, str]


def graph_svg(
    graph: PlanGraph,
    *,
    href: Href,
    title: str,
    added: frozenset[Edge] = frozenset(),
    removed: frozenset[Edge] = frozenset(),
) -> SafeString:
    """The ``<svg>`` element to put in a page (styled by graph.css, which the page links).
    ``added``: edges of ``graph`` to mark as new (a changeset adds them); ``removed``: edges not in
    ``graph`` any more, drawn struck through where both their tickets still are."""
    svg = _svg(graph, href=href, title=title, style="", added=added, removed=removed)
    return mark_safe(svg)  # noqa: S308 - every text escaped


def graph_document(graph: PlanGraph, *, href: Href, title: str) -> str:
    """A standalone SVG document (``image/svg+xml``), its stylesheet embedded."""
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + _svg(
        graph, href=href, title=title, style=f"<style>{embedded_css()}</style>"
    )


@cache
def _css() -> str:
    return CSS.read_text(encoding="utf-8")


def embedded_css() -> str:
    """graph.css as the standalone document's ``<style>`` holds it: as XML text."""
    return _css().replace("&", "&amp;").replace("<", "&lt;")


def embedded_css_hash() -> str:
    """The CSP source that lets the standalone document's one ``<style>`` apply: the hash of its
    text as the browser reads it (unescaped)."""
    digest = hashlib.sha256(_css().encode()).digest()
    return "sha256-" + base64.b64encode(digest).decode()


def _svg(
    graph: PlanGraph,
    *,
    href: Href,
    title: str,
    style: str,
    added: frozenset[Edge] = frozenset(),
    removed: frozenset[Edge] = frozenset(),
) -> str:
    drawn, left_out = shown(graph)
    keys = {node.key for node in drawn.nodes}
    gone = tuple(sorted(e for e in removed if e[0] in keys and e[1] in keys and e not in drawn.edges))
    placed = layout([node.key for node in drawn.nodes], drawn.edges + gone)
    ids = "graph-" + hashlib.sha256(title.encode("utf-8", "replace")).hexdigest()[:10]
    said = caption(drawn, left_out)
    width, height = round(placed.width), round(placed.height)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" aria-labelledby="{ids}-title {ids}-desc">',
        f'<title id="{ids}-title">{_text(title)}</title>',
        f'<desc id="{ids}-desc">{_text(said)} Arrows go from a blocker to the ticket it blocks.</desc>',
        style,
        _markers(ids),
        f'<rect class="graph-bg" width="{width}" height="{height}"/>',
        f'<text class="graph-caption" x="{MARGIN}" y="{MARGIN + 8}" aria-hidden="true">{_text(said)}</text>',
        _edges(drawn, placed, ids, added=added, removed=frozenset(gone)),
        *_nodes(drawn, placed, href),
    ]
    parts.append("</svg>")
    return "".join(parts)


def _markers(ids: str) -> str:
    arrow = '<path d="M0,0 L10,5 L0,10 z"/>'
    common = (
        'viewBox="0 0 10 10" refX="10" refY="5" markerUnits="userSpaceOnUse" markerWidth="10" '
        'markerHeight="10" orient="auto"'
    )
    return (
        f'<defs><marker id="{ids}-arrow" class="graph-arrow" {common}>{arrow}</marker>'
        f'<marker id="{ids}-arrow-chain" class="graph-arrow chain" {common}>{arrow}</marker>'
        f'<marker id="{ids}-arrow-added" class="graph-arrow added" {common}>{arrow}</marker>'
        f'<marker id="{ids}-arrow-removed" class="graph-arrow removed" {common}>{arrow}</marker></defs>'
    )


def _path(points: tuple[Point, ...]) -> str:
    """Cubic segments leaving and reaching each point level (smooth), straight along a lane."""
    (x, y), rest = points[0], points[1:]
    drawn = [f"M{x:g},{y:g}"]
    for n, (next_x, next_y) in enumerate(rest):
        if next_y == y and n + 1 < len(rest) and rest[n + 1][1] == y:
            continue  # the middle of a level run: the run is one straight segment
        if next_y == y:
            drawn.append(f"H{next_x:g}")
        else:
            bend = (next_x - x) / 2
            drawn.append(f"C{x + bend:g},{y:g} {next_x - bend:g},{next_y:g} {next_x:g},{next_y:g}")
        x, y = next_x, next_y
    return " ".join(drawn)


def _edges(
    graph: PlanGraph, placed: Layout, ids: str, *, added: frozenset[Edge], removed: frozenset[Edge]
) -> str:
    chain = set(zip(graph.chain, graph.chain[1:], strict=False))
    drawn = ['<g class="edges" aria-hidden="true">']
    for route in placed.routes:
        pair = (route.blocker, route.blocked)
        on_chain = pair in chain
        change = "removed" if pair in removed else "added" if pair in added else ""
        classes = "edge" + " chain" * on_chain + " back" * route.back + f" {change}" * bool(change)
        marker = f"{ids}-arrow-{change or 'chain'}" if change or on_chain else f"{ids}-arrow"
        drawn.append(f'<path class="{classes}" d="{_path(route.points)}" marker-end="url(#{marker})"/>')
    drawn.append("</g>")
    return "".join(drawn)


def _nodes(graph: PlanGraph, placed: Layout, href: Href) -> list[str]:
    chain = set(graph.chain)
    drawn = ['<g class="nodes">']
    if placed.grid_top is not None and graph.edges:
        y = placed.grid_top - SECTION_GAP / 3
        drawn.append(
            f'<text class="graph-section" x="{MARGIN}" y="{y:g}">Tickets without dependencies</text>'
        )
    for node in graph.nodes:
        drawn.append(_node(node, placed, href=href(node), on_chain=node.key in chain))
    drawn.append("</g>")
    return drawn


def _node(node: GraphNode, placed: Layout, *, href: str | None, on_chain: bool) -> str:
    box = placed.boxes[node.key]
    classes = ["node", f"state-{_class_word(node.state)}"]
    classes += [name for name, on in _marks(node, on_chain=on_chain) if on]
    name = _text(accessible_name(node, on_chain=on_chain))
    inner = [
        f'<g class="{" ".join(classes)}" transform="translate({box.x:g},{box.y:g})">',
        f"<title>{name}</title>",
    ]
    if on_chain:
        inner.append(
            f'<rect class="halo" x="-4" y="-4" width="{BOX_WIDTH + 8}" height="{BOX_HEIGHT + 8}" rx="9"/>'
        )
    inner.append(f'<rect class="box" width="{BOX_WIDTH}" height="{BOX_HEIGHT}" rx="6"/>')
    # The runnable mark is a drawn triangle, not a character: the link's name holds every text
    # the box shows (see link_name), and "▶" is no word to read out. The texts are separated
    # by spaces, in the order link_name says them.
    key_x = 10
    if node.runnable:
        inner.append('<path class="badge" d="M10,9.5 L19,14.5 L10,19.5 z"/>')
        key_x = 24
    inner.append(f'<text class="key" x="{key_x}" y="19">{_text(_short(node.key, KEY_CHARS))}</text> ')
    state = _text(_state_word(node.state))
    inner.append(f'<text class="state" x="{BOX_WIDTH - 10}" y="19" text-anchor="end">{state}</text> ')
    if node.claimed_by:
        holder = _text(_short(node.claimed_by, HOLDER_CHARS))
        inner.append(f'<text class="holder" x="10" y="53">held by {holder}</text> ')
    inner.append(f'<text class="label" x="10" y="37">{_text(_short(node.title, TITLE_CHARS))}</text>')
    inner.append("</g>")
    if href is None:
        return "".join(inner)
    label = _text(link_name(node, on_chain=on_chain))
    return f'<a href="{_text(href)}" aria-label="{label}">{"".join(inner)}</a>'


def _class_word(state: str) -> str:
    """A state as a class name: letters, digits and underscores only (states are a closed set,
    but a class attribute is no place to find out)."""
    return re.sub(r"[^a-z0-9_]", "", state.lower()) or "unknown"


def _marks(node: GraphNode, *, on_chain: bool) -> tuple[tuple[str, bool], ...]:
    return (
        ("runnable", node.runnable),
        ("resolved", node.state in RESOLVED_STATES),
        ("chain", on_chain),
        ("claimed", bool(node.claimed_by)),
        ("new", node.new),
    )


@dataclass(frozen=True)
class Blocker:
    key: str
    state: str
    href: str | None


@dataclass(frozen=True)
class GraphRow:
    """One ticket of the list that stands for the picture: what it is and what blocks it."""

    key: str
    title: str
    state: str
    runnable: bool
    claimed_by: str
    new: bool
    on_chain: bool
    href: str | None
    blockers: tuple[Blocker, ...]

    @property
    def state_word(self) -> str:
        return _state_word(self.state)


def graph_rows(graph: PlanGraph, *, href: Href) -> list[GraphRow]:
    """Every ticket (none left out: text is cheap), in order, with its blockers."""
    by_key = {node.key: node for node in graph.nodes}
    blockers: dict[str, list[Blocker]] = {}
    for a, b in dict.fromkeys(graph.edges):
        if a in by_key and b in by_key:
            blocker = by_key[a]
            blockers.setdefault(b, []).append(
                Blocker(key=a, state=_state_word(blocker.state), href=href(blocker))
            )
    chain = set(graph.chain)
    return [
        GraphRow(
            key=node.key,
            title=node.title,
            state=node.state,
            runnable=node.runnable,
            claimed_by=node.claimed_by,
            new=node.new,
            on_chain=node.key in chain,
            href=href(node),
            blockers=tuple(blockers.get(node.key, ())),
        )
        for node in graph.nodes
    ]


@dataclass(frozen=True)
class LegendEntry:
    """One mark of the picture and what it means: ``swatch`` is a small SVG drawn with the same
    classes as the picture (so graph.css colours it the same), ``words`` says it."""

    swatch: SafeString
    words: str


def _box_swatch(classes: str, *, halo: bool = False, runnable: bool = False) -> SafeString:
    parts = ['<svg class="graph swatch" width="34" height="22" viewBox="-3 -3 34 22" aria-hidden="true">']
    parts.append(f'<g class="{classes}">')
    if halo:
        parts.append('<rect class="halo" x="-1.5" y="-1.5" width="31" height="19" rx="5"/>')
    parts.append('<rect class="box" x="1" y="1" width="26" height="14" rx="3"/>')
    if runnable:
        parts.append('<path class="badge" d="M5,4.5 L12,8 L5,11.5 z"/>')
    parts.append("</g></svg>")
    return mark_safe("".join(parts))  # noqa: S308 - fixed markup, no text of anyone's


def _edge_swatch(classes: str) -> SafeString:
    return mark_safe(  # noqa: S308 - fixed markup
        '<svg class="graph swatch" width="34" height="22" viewBox="0 0 34 22" aria-hidden="true">'
        f'<path class="{classes}" d="M2,11 H32"/></svg>'
    )


def graph_legend(*, new: bool = False, added: bool = False, removed: bool = False) -> list[LegendEntry]:
    """What each mark of the picture means; the marks of a changeset's graph only where it has them."""
    entries = [
        LegendEntry(_box_swatch("node state-draft"), "Draft"),
        LegendEntry(_box_swatch("node state-ready"), "Ready"),
        LegendEntry(_box_swatch("node state-in_progress"), "In progress"),
        LegendEntry(_box_swatch("node state-in_review"), "In review"),
        LegendEntry(_box_swatch("node state-done resolved"), "Done or cancelled (faded)"),
        LegendEntry(
            _box_swatch("node state-ready runnable", runnable=True), "Runnable (thick border, triangle)"
        ),
        LegendEntry(
            _box_swatch("node state-ready chain", halo=True), "On the longest remaining chain (ringed)"
        ),
        LegendEntry(_edge_swatch("edge"), "Blocks: the arrow points to the ticket that waits"),
        LegendEntry(_edge_swatch("edge chain"), "A link of the longest remaining chain"),
    ]
    if new:
        entries.append(
            LegendEntry(_box_swatch("node state-draft new"), "New: the changeset creates it (dashed)")
        )
    if added:
        entries.append(LegendEntry(_edge_swatch("edge added"), "Dependency the changeset adds"))
    if removed:
        entries.append(LegendEntry(_edge_swatch("edge removed"), "Dependency the changeset removes (struck)"))
    return entries


def graph_context(
    graph: PlanGraph,
    *,
    href: Href,
    title: str,
    label: str,
    added: frozenset[Edge] = frozenset(),
    removed: frozenset[Edge] = frozenset(),
) -> dict[str, object]:
    """What ``tracker/_graph.html`` takes: the picture, its region's label, its legend and the list."""
    keys = {node.key for node in graph.nodes}
    return {
        "graph_svg": graph_svg(graph, href=href, title=title, added=added, removed=removed),
        "graph_label": label,
        "graph_rows": graph_rows(graph, href=href),
        "graph_legend": graph_legend(
            new=any(node.new for node in graph.nodes),
            added=bool(added & set(graph.edges)),
            removed=any(a in keys and b in keys for a, b in removed - set(graph.edges)),
        ),
    }
