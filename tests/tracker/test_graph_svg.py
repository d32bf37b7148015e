"""The dependency graph as a picture: the layout (left to right, no overlaps, layers by longest
path, deterministic, cycles survived, isolated tickets packed), the SVG (states, marks, the
chain, links, escaping, the cap), the list beside it, and ``/projects/{key}/graph.svg``."""

from __future__ import annotations

import base64
import hashlib
import random
import xml.etree.ElementTree as ET

import pytest
from django.template.loader import render_to_string
from django.test import Client

from tests.factories import make_membership, make_project, make_user
from tracker.graph.layout import BOX_HEIGHT, BOX_WIDTH, Layout, layout
from tracker.graph.plan_graph import GraphNode, PlanGraph
from tracker.graph.svg import MAX_NODES, graph_context, graph_document, graph_svg
from tracker.models import Role
from tracker.services.activity import Actor
from tracker.services.items import dependency_add
from tracker.services.work import claim_take

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = "</svg><script>alert(1)</script> & \"quoted\" 'single' <b>bold</b>\x00"


def random_plan(count: int, edges: int, seed: int = 7) -> tuple[list[str], list[tuple[str, str]]]:
    """``count`` tickets and ``edges`` dependencies from a lower number to a higher one (no cycle)."""
    rng = random.Random(seed)
    keys = [f"T-{n}" for n in range(1, count + 1)]
    pairs: set[tuple[str, str]] = set()
    while len(pairs) < edges:
        a = rng.randrange(count - 1)
        b = min(count - 1, a + rng.randrange(1, 8))
        pairs.add((keys[a], keys[b]))
    return keys, sorted(pairs)


def overlapping(placed: Layout) -> list[tuple[str, str]]:
    boxes = sorted(placed.boxes.values(), key=lambda box: (box.x, box.y))
    found = []
    for n, one in enumerate(boxes):
        for other in boxes[n + 1 :]:
            if other.x >= one.x + BOX_WIDTH:
                break
            if abs(one.y - other.y) < BOX_HEIGHT:
                found.append((one.key, other.key))
    return found


def node(
    key: str,
    state: str = "ready",
    *,
    title: str = "",
    runnable: bool = False,
    claimed_by: str = "",
    new: bool = False,
) -> GraphNode:
    return GraphNode(
        key=key,
        title=title or f"Title of {key}",
        state=state,
        runnable=runnable,
        claimed_by=claimed_by,
        new=new,
    )


def link(item: GraphNode) -> str | None:
    return None if item.new else f"/projects/T/items/{item.key}/"


def parsed(svg: str) -> ET.Element:
    return ET.fromstring(svg.split("\n", 1)[1] if svg.startswith("<?xml") else svg)


def groups(root: ET.Element) -> dict[str, ET.Element]:
    """Each ticket's ``<g class="node …">`` by key (its title starts with the key)."""
    found = {}
    for group in root.iter(f"{SVG}g"):
        if "node" in group.get("class", "").split():
            title = group.find(f"{SVG}title")
            assert title is not None
            found[(title.text or "").split(":")[0]] = group
    return found


def classes(element: ET.Element) -> set[str]:
    return set(element.get("class", "").split())


# The layout


def test_every_edge_goes_left_to_right_and_no_boxes_overlap():
    keys, edges = random_plan(120, 180)
    placed = layout([*keys, "LONE-1", "LONE-2"], edges)

    for blocker, blocked in edges:
        assert placed.boxes[blocker].x + BOX_WIDTH < placed.boxes[blocked].x, (blocker, blocked)
    for route in placed.routes:
        xs = [x for x, _ in route.points]
        assert xs == sorted(xs)
    assert overlapping(placed) == []
    assert all(
        box.x + BOX_WIDTH <= placed.width and box.y + BOX_HEIGHT <= placed.height
        for box in placed.boxes.values()
    )


def test_a_ticket_sits_one_layer_right_of_its_furthest_blocker():
    placed = layout(["A", "B", "C", "D", "E"], [("A", "B"), ("B", "C"), ("A", "C"), ("D", "C"), ("C", "E")])

    assert {key: box.layer for key, box in placed.boxes.items()} == {"A": 0, "B": 1, "C": 2, "D": 0, "E": 3}


def test_a_long_edge_runs_between_boxes_not_through_them():
    placed = layout(
        ["A", "B", "C", "D", "X", "Y"], [("A", "B"), ("B", "C"), ("C", "D"), ("A", "D"), ("X", "Y")]
    )

    (route,) = [route for route in placed.routes if (route.blocker, route.blocked) == ("A", "D")]
    inner = route.points[1:-1]
    assert len(inner) == 4  # level through the two layers it passes
    for x, y in inner:
        for box in placed.boxes.values():
            assert not (box.x < x < box.x + BOX_WIDTH and box.y <= y <= box.y + BOX_HEIGHT)


def test_the_same_graph_gives_the_same_picture():
    keys, edges = random_plan(80, 120, seed=3)
    graph = PlanGraph(nodes=tuple(node(key) for key in keys), edges=tuple(edges), chain=tuple(keys[:2]))

    assert layout(keys, edges) == layout(keys, edges)
    assert graph_svg(graph, href=link, title="Plan") == graph_svg(graph, href=link, title="Plan")


def test_a_cycle_is_laid_out_and_drawn_back():
    placed = layout(
        ["A", "B", "C", "D"],
        [("A", "B"), ("B", "C"), ("C", "A"), ("A", "A"), ("A", "B"), ("C", "D"), ("D", "C")],
    )

    assert set(placed.boxes) == {"A", "B", "C", "D"}
    assert overlapping(placed) == []
    assert len(placed.routes) == 5  # the self-dependency and the repeat left out
    assert sum(route.back for route in placed.routes) == 2
    graph = PlanGraph(nodes=tuple(node(key) for key in "ABCD"), edges=(("A", "B"), ("B", "A")))
    assert 'class="edge back"' in graph_svg(graph, href=link, title="Cycle")


def test_isolated_tickets_are_packed_in_a_grid_under_the_rest():
    lone = [f"L-{n}" for n in range(200)]
    placed = layout(lone, [])

    rows = {box.y for box in placed.boxes.values()}
    assert len(rows) <= 25
    assert placed.height < 30 * (BOX_HEIGHT + 20)
    assert overlapping(placed) == []

    mixed = layout(["A", "B", *lone], [("A", "B")])
    bottom = max(mixed.boxes[key].y for key in "AB") + BOX_HEIGHT
    assert mixed.grid_top is not None
    assert all(mixed.boxes[key].y >= bottom for key in lone)
    assert overlapping(mixed) == []


def test_an_empty_graph_is_a_picture_too():
    svg = graph_svg(PlanGraph(nodes=(), edges=()), href=link, title="Nothing")

    assert "0 tickets, 0 dependencies." in svg
    parsed(svg)


# The picture


def test_boxes_are_classed_by_state_and_marked():
    graph = PlanGraph(
        nodes=(
            node("T-1", "done"),
            node("T-2", "ready", runnable=True),
            node("T-3", "in_progress", claimed_by="ada"),
            node("T-4", "cancelled"),
            node("T-5", "draft", new=True),
        ),
        edges=(("T-1", "T-2"), ("T-2", "T-3")),
    )

    root = parsed(graph_svg(graph, href=link, title="Plan"))
    found = groups(root)

    assert classes(found["T-1"]) == {"node", "state-done", "resolved"}
    assert classes(found["T-2"]) == {"node", "state-ready", "runnable"}
    assert classes(found["T-3"]) == {"node", "state-in_progress", "claimed"}
    assert classes(found["T-4"]) == {"node", "state-cancelled", "resolved"}
    assert classes(found["T-5"]) == {"node", "state-draft", "new"}
    # The runnable mark is a drawn triangle (no "▶" for a screen reader to spell out), the holder
    # is said in words: the link's name must contain every text the box shows (see below).
    assert found["T-2"].find(f"{SVG}path[@class='badge']") is not None
    assert found["T-1"].find(f"{SVG}path[@class='badge']") is None
    assert "held by ada" in "".join(found["T-3"].itertext())
    links = {a.get("href"): a.get("aria-label") for a in root.iter(f"{SVG}a")}
    assert links["/projects/T/items/T-2/"] == "T-2, ready: Title of T-2 (runnable)"
    assert links["/projects/T/items/T-3/"] == "T-3, in progress, held by ada: Title of T-3"


def _spoken(text: str) -> str:
    """Text as axe's label-content-name-mismatch compares it: lower case, without punctuation or
    symbols, whitespace collapsed."""
    kept = "".join(c if c.isalnum() or c.isspace() else "" for c in text.lower())
    return " ".join(kept.split())


def test_each_link_is_named_by_its_visible_text_first():
    long_title = "A title far longer than the box shows, with: punctuation & more words"
    graph = PlanGraph(
        nodes=(
            node("T-1", "in_review", title=long_title, runnable=True, claimed_by="someone-with-a-long-name"),
            node("T-2", "ready", title="Short"),
        ),
        edges=(("T-1", "T-2"),),
        chain=("T-1", "T-2"),
    )

    root = parsed(graph_svg(graph, href=link, title="Plan"))

    for anchor in root.iter(f"{SVG}a"):
        group = anchor.find(f"{SVG}g")
        assert group is not None
        # What shows: every text element's text, in document order (the tooltip's <title> does not).
        visible = " ".join("".join(t.itertext()) for t in group.iter(f"{SVG}text"))
        name = anchor.get("aria-label") or ""
        assert _spoken(visible) in _spoken(name), (visible, name)
    first = next(iter(root.iter(f"{SVG}a"))).get("aria-label") or ""
    assert long_title in first  # the whole title, not the box's shortened one
    assert "on the longest remaining chain" in first


def test_a_changesets_added_and_removed_dependencies_are_marked():
    graph = PlanGraph(
        nodes=(node("T-1"), node("T-2"), node("T-3"), node("New 1", new=True)),
        edges=(("T-1", "T-2"), ("New 1", "T-3")),
    )

    root = parsed(
        graph_svg(
            graph,
            href=link,
            title="After",
            added=frozenset({("New 1", "T-3")}),
            removed=frozenset({("T-2", "T-3"), ("T-9", "T-3")}),  # T-9 is not drawn: left out
        )
    )

    edges = [classes(path) for path in root.iter(f"{SVG}path") if "edge" in classes(path)]
    assert len(edges) == 3
    assert sum("added" in found for found in edges) == 1
    assert sum("removed" in found for found in edges) == 1
    html = render_to_string(
        "tracker/_graph.html",
        graph_context(
            graph,
            href=link,
            title="After",
            label="After",
            added=frozenset({("New 1", "T-3")}),
            removed=frozenset({("T-2", "T-3")}),
        ),
    )
    assert "<summary>Legend</summary>" in html
    for words in (
        "Runnable",
        "On the longest remaining chain",
        "Done or cancelled (faded)",
        "Dependency the changeset adds",
        "Dependency the changeset removes",
        "New: the changeset",
    ):
        assert words in html
    plain = render_to_string("tracker/_graph.html", graph_context(graph, href=link, title="P", label="P"))
    assert "Dependency the changeset adds" not in plain


def test_only_tickets_with_a_page_are_links():
    graph = PlanGraph(nodes=(node("T-1"), node("T-2", new=True), node("T-3")), edges=(("T-1", "T-2"),))

    root = parsed(graph_svg(graph, href=link, title="After"))

    assert [a.get("href") for a in root.iter(f"{SVG}a")] == [
        "/projects/T/items/T-1/",
        "/projects/T/items/T-3/",
    ]
    assert "T-2" in groups(root)


def test_the_longest_chain_is_highlighted():
    graph = PlanGraph(
        nodes=tuple(node(f"T-{n}") for n in range(1, 6)),
        edges=(("T-1", "T-2"), ("T-2", "T-3"), ("T-4", "T-3"), ("T-3", "T-5")),
        chain=("T-1", "T-2", "T-3", "T-5"),
    )

    root = parsed(graph_svg(graph, href=link, title="Plan"))
    found = groups(root)

    assert {key for key, group in found.items() if "chain" in classes(group)} == {"T-1", "T-2", "T-3", "T-5"}
    assert all(found[key].find(f"{SVG}rect[@class='halo']") is not None for key in ("T-1", "T-5"))
    edges = [path for path in root.iter(f"{SVG}path") if "edge" in classes(path)]
    assert [("chain" in classes(path)) for path in edges] == [True, True, False, True]
    assert "longest remaining chain of blockers has 4 tickets" in "".join(root.itertext())


def test_hostile_titles_stay_text():
    graph = PlanGraph(
        nodes=(node("T-1", title=HOSTILE, claimed_by=HOSTILE), node("T-2", title="ok")),
        edges=(("T-1", "T-2"),),
    )
    title = 'Plan "<script>" & co'

    svg = graph_svg(graph, href=link, title=title)
    document = graph_document(graph, href=link, title=title)

    for text in (svg, document):
        assert "<script" not in text
        assert "</svg><" not in text
        assert "<b>" not in text
        assert text.count("</svg>") == 1
    root = parsed(document)  # still well-formed XML, the NUL replaced
    hover = groups(root)["T-1"].find(f"{SVG}title")
    assert hover is not None
    assert hover.text is not None
    assert hover.text.startswith("T-1: " + HOSTILE.replace("\x00", "\ufffd"))
    assert root.find(f"{SVG}title").text == title  # type: ignore[union-attr]


def test_the_picture_has_no_inline_style_but_the_document_embeds_its_stylesheet():
    keys, edges = random_plan(30, 40)
    graph = PlanGraph(nodes=tuple(node(key) for key in keys), edges=tuple(edges))

    svg = graph_svg(graph, href=link, title="Plan")
    root = parsed(graph_document(graph, href=link, title="Plan"))

    assert "style" not in svg
    assert 'viewBox="0 0 ' in svg
    assert root.get("width")
    assert root.get("height")
    assert [element.tag for element in root.iter(f"{SVG}style")] == [f"{SVG}style"]


def test_past_the_cap_resolved_tickets_far_from_the_work_are_left_out():
    count = MAX_NODES + 150
    nodes = tuple(node(f"T-{n}", "done" if n <= 300 else "ready") for n in range(1, count + 1))
    edges = (("T-1", "T-301"), ("T-2", "T-3"))
    graph = PlanGraph(nodes=nodes, edges=edges)

    root = parsed(graph_svg(graph, href=link, title="Big"))
    found = groups(root)

    unresolved = {item.key for item in nodes if item.state == "ready"}
    assert set(found) == unresolved | {"T-1"}  # T-1 blocks an unresolved one; T-2 and T-3 block none
    left_out = count - len(found)
    assert f"{left_out} resolved or far-off tickets left out" in "".join(root.itertext())
    assert f"{len(found)} tickets, 1 dependency" in "".join(root.itertext())


def test_the_template_frames_the_picture_and_lists_the_graph():
    graph = PlanGraph(
        nodes=(node("T-1", "done", title=HOSTILE), node("T-2", runnable=True), node("T-3", new=True)),
        edges=(("T-1", "T-2"), ("T-2", "T-3")),
        chain=("T-2", "T-3"),
    )

    html = render_to_string(
        "tracker/_graph.html", graph_context(graph, href=link, title="Plan", label="The plan's graph")
    )

    assert '<div class="graph-scroll" tabindex="0" role="region" aria-label="The plan&#x27;s graph">' in html
    assert "<script" not in html
    assert "<summary>The graph as a list</summary>" in html
    assert 'Blocked by <a href="/projects/T/items/T-1/">T-1</a> (done).' in html
    assert "Blocked by T-2 (ready)." not in html
    assert 'Blocked by <a href="/projects/T/items/T-2/">T-2</a> (ready).' in html
    assert "ready, runnable, on the longest remaining chain." in html
    assert "Nothing blocks it." in html
    assert "tracker/graph.css" in html


# /projects/{key}/graph.svg


@pytest.fixture
def plan(project, make_item, owner):
    first = make_item(title="Design <the> schema", state="ready")
    second = make_item(title="Build it", state="ready")
    make_item(title="On its own", state="draft")
    dependency_add(actor=Actor(user=owner), blocker=first, blocked=second)
    claim_take(actor=Actor(user=owner), project=project, item=first)
    return first, second


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["member", "viewer"])
def test_who_reads_the_project_gets_its_graph(users, plan, role):
    client = Client()
    client.force_login(users[role])

    response = client.get("/projects/BAL/graph.svg")

    assert response.status_code == 200
    assert response["Content-Type"] == "image/svg+xml; charset=utf-8"
    root = parsed(response.content.decode())
    assert root.tag == f"{SVG}svg"
    hrefs = [a.get("href") for a in root.iter(f"{SVG}a")]
    assert hrefs == ["/projects/BAL/items/BAL-1/", "/projects/BAL/items/BAL-2/", "/projects/BAL/items/BAL-3/"]
    found = groups(root)
    assert "claimed" in classes(found["BAL-1"])
    assert "held by owner" in "".join(found["BAL-1"].itertext())
    assert "Design <the> schema" in "".join(root.itertext())
    style = root.find(f"{SVG}style")
    assert style is not None
    assert style.text is not None
    digest = base64.b64encode(hashlib.sha256(style.text.encode()).digest()).decode()
    assert f"style-src 'sha256-{digest}'" in response["Content-Security-Policy"]
    assert "default-src 'none'" in response["Content-Security-Policy"]


@pytest.mark.django_db
def test_who_cannot_read_the_project_gets_404_as_for_no_project(org, users, plan):
    sibling = make_project(organization=org, key="SIB", name="Sibling")
    neighbour = make_user(username="neighbour")
    make_membership(project=sibling, user=neighbour, role=Role.MEMBER)

    for user in (neighbour, users["stranger"]):
        client = Client()
        client.force_login(user)
        assert client.get("/projects/BAL/graph.svg").status_code == 404
    client = Client()
    client.force_login(users["member"])
    assert client.get("/projects/NOPE/graph.svg").status_code == 404
    assert client.get("/projects/SIB/graph.svg").status_code == 404


@pytest.mark.django_db
def test_the_graph_needs_a_login(plan):
    response = Client().get("/projects/BAL/graph.svg")

    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/projects/BAL/graph.svg"
