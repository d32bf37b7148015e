"""Accessibility scans (axe-core, through axe-playwright-python) of the pages a team lives in.

The chat page is scanned holding everything it can show at once: the human's and the
planner's messages, a tool call folded open, a proposed changeset's card, a pending
question and a pending approval (fed by a stand-in for the chat's socket, as in
``test_browser_cards.py``, so that every card is there at the same time); then the chat
list, the home page and the API keys page. Each at a wide and a phone-sized (375 px) viewport, in the light
scheme and, wide, the dark one. A ``serious`` or ``critical`` violation fails the test,
with every violation printed readably.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from tests.e2e.chat_page import new_chat, send
from tests.e2e.conftest import VIEWPORTS
from tests.e2e.test_browser_cards import APPROVAL, QUESTION, open_chat
from tests.fakes.messages_api import ToolCallSpec, ToolUseReply

# What a page shows and does, the same in both modes: the embedded mode runs it (tests/conftest.py).
pytestmark = [pytest.mark.browser, pytest.mark.pages]

FAILING = ("serious", "critical")
# Rules of WCAG A and AA, axe's best practices (landmarks, heading order, region...) and its
# experimental rules (SPEC § 9: e.g. a link's accessible name contains its visible text).
RUN_OPTIONS = {
    "resultTypes": ["violations"],
    "runOnly": {
        "type": "tag",
        "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice", "experimental"],
    },
}

# Wider than a phone, and than the wide viewport's column: each scrolls sideways, by keyboard too.
WIDE_CODE = f"```python\nprint('{'wide ' * 60}')\n```\n"
WIDE_TABLE = "\n".join(
    ["| " + " | ".join(f"column {n}" for n in range(16)) + " |", "|" + "---|" * 16]
    + ["| " + " | ".join(f"cell {row}.{n}" for n in range(16)) + " |" for row in range(3)]
)
CHANGESET = {"number": 7, "title": "Add CSV export", "status": "proposed", "operations": [{"op": "create"}]}
DIFF = [
    {"op": "skip", "text": "3 unchanged lines"},
    {"op": "same", "text": "Members book up to **7 days** ahead."},
    {"op": "removed", "text": "Cancel up to 24 hours before."},
    {"op": "added", "text": f"Cancel up to 12 hours before; {'longer words ' * 20}"},
]
KNOWLEDGE_WRITE = {
    "id": 4,
    "op": "update",
    "kind": "decision",
    "title": "Booking rules",
    "version": 2,
    "previous": {"kind": "decision", "title": "Booking rule", "version": 1},
    "diff": DIFF,
    "url": "/projects/DEMO/knowledge/4/",
}
KNOWLEDGE_APPROVAL: dict[str, Any] = {
    "type": "request",
    "id": "33333333-3333-4333-8333-333333333333",
    "kind": "approval",
    "tool": "update_knowledge",
    "input": {"id": 4, "version": 1, "body": "Cancel up to 6 hours before."},
    "preview": [
        {
            "kind": "knowledge",
            "id": 4,
            "op": "update",
            "entry_kind": "decision",
            "title": "Booking rules",
            "previous": {"kind": "decision", "title": "Booking rules", "version": 2},
            "diff": DIFF,
            "stale": True,
            "hidden": False,
        }
    ],
}
TRANSCRIPT: list[dict[str, Any]] = [
    {"type": "user_message", "seq": 1, "text": "What can run next?", "author": "demo", "kind": "human"},
    {"type": "turn_started", "turn": 1, "continued": False},
    {"type": "text_delta", "text": f"Here is **the plan**:\n\n- one\n- two\n\n{WIDE_CODE}\n{WIDE_TABLE}\n"},
    {"type": "tool_call", "id": "toolu_1", "name": "list_runnable", "input": {"limit": 3}},
    {
        "type": "tool_result",
        "id": "toolu_1",
        "name": "list_runnable",
        "is_error": False,
        "output": {"tickets": []},
    },
    {"type": "tool_call", "id": "toolu_2", "name": "propose_changeset", "input": {"title": "Add CSV export"}},
    {
        "type": "draft",
        "kind": "changeset",
        "artifact_id": "changeset:7",
        "snapshot": {**CHANGESET, "review_url": "/projects/DEMO/changesets/7/"},
    },
    {"type": "tool_result", "id": "toolu_2", "name": "propose_changeset", "is_error": False, "output": {}},
    {"type": "text_delta", "text": "Proposed for your review."},
    {"type": "tool_call", "id": "toolu_3", "name": "update_knowledge", "input": {"id": 4, "version": 1}},
    {  # a knowledge write's card: the entry and its diff (docs/domain.md#knowledge-cards)
        "type": "draft",
        "kind": "knowledge",
        "artifact_id": "knowledge:4",
        "snapshot": KNOWLEDGE_WRITE,
    },
    {"type": "tool_result", "id": "toolu_3", "name": "update_knowledge", "is_error": False, "output": {}},
    {  # decided since: the card shows who applied it, with their note
        "type": "changeset",
        "number": 7,
        "status": "applied",
        "decided_by": "owner",
        "decided_at": None,
        "note": "Looks right.",
        "reason": "",
    },
]
REQUESTS: list[dict[str, Any]] = [
    {
        **QUESTION,
        "question": "Which **database** should the export read?",
        "options": ["PostgreSQL", "SQLite"],
    },
    APPROVAL,
    KNOWLEDGE_APPROVAL,
]


@pytest.fixture(params=[("wide", "light"), ("375", "light"), ("wide", "dark")], ids="-".join)
def tab(request, browser, server, signed_in) -> Iterator[Any]:
    width, scheme = request.param
    context = browser.new_context(
        base_url=server.url, storage_state=signed_in, viewport=VIEWPORTS[width], color_scheme=scheme
    )
    context.set_default_timeout(10_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert not errors, errors


def report(violations: list[dict[str, Any]]) -> str:
    lines = []
    for violation in violations:
        lines.append(
            f"[{violation['impact']}] {violation['id']}: {violation['help']} ({violation['helpUrl']})"
        )
        for node in violation["nodes"]:
            lines.append(f"    at {' '.join(map(str, node['target']))}")
            lines.append(f"       {node['html'][:200]}")
            for line in (node.get("failureSummary") or "").splitlines():
                lines.append(f"       {line.strip()}")
    return "\n".join(lines)


def assert_accessible(page: Any) -> None:
    results = Axe().run(page, options=RUN_OPTIONS).response
    failing = [v for v in results["violations"] if v["impact"] in FAILING]
    assert not failing, f"{page.url}\n{report(results['violations'])}"


def test_the_chat_page_with_every_kind_of_entry_is_accessible(tab):
    fake = open_chat(tab, TRANSCRIPT)
    send(tab, "Also the blockers")  # while the turn runs: queued
    expect(tab.locator("#chat-log .entry.queued")).to_have_count(1)
    for frame in REQUESTS:
        fake.send(frame)
    log = tab.locator("#chat-log")
    expect(log.locator(".entry.user")).to_have_count(2)
    expect(log.locator(".entry.assistant")).to_have_count(2)
    expect(log.locator("details.tool")).to_have_count(3)
    expect(log.locator(".changeset-card")).to_have_count(1)
    expect(log.locator(".changeset-card .decision-line")).to_have_text("Applied by owner")
    expect(log.locator(".request-card.pending")).to_have_count(3)
    expect(log.locator(".knowledge-card .kdiff ins")).to_have_count(1)
    expect(log.locator(".request-card.pending").nth(2).get_by_role("button", name="Publish")).to_be_visible()
    log.locator("details.tool summary").first.click()  # a fold open, its input and output shown
    expect(log.locator(".tool-output").first).to_be_visible()
    tab.get_by_label("Message to the planner").focus()
    width = tab.viewport_size["width"]
    scheme = tab.evaluate("matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light'")
    tab.screenshot(path=f"/tmp/ballet-a11y-chat-{width}-{scheme}.png", full_page=True)  # to look at
    assert_accessible(tab)


@pytest.fixture(scope="module")
def waiting_chat(browser, server, signed_in, script) -> None:
    """A chat of demo's whose planner asks a question: the list and the home page mark it."""
    script.on(
        "a11y-asks",
        ToolUseReply(
            [ToolCallSpec("ask_human", {"question": "Replica or primary?", "options": ["Replica"]})]
        ),
    )
    context = browser.new_context(base_url=server.url, storage_state=signed_in)
    try:
        page = context.new_page()
        new_chat(page)
        send(page, "a11y-asks: which database?")
        expect(page.locator("#chat-log .request-card.pending")).to_have_count(1)
    finally:
        context.close()


def test_the_chat_list_is_accessible(tab, waiting_chat):
    tab.goto("/projects/DEMO/chat/")
    expect(tab.get_by_role("heading", name="Planner chats")).to_be_visible()
    expect(tab.locator(".session-list .badge.waiting")).not_to_have_count(0)
    assert_accessible(tab)


def test_the_home_page_is_accessible(tab, waiting_chat):
    tab.goto("/")
    expect(tab.get_by_role("heading", name="Your projects")).to_be_visible()
    expect(tab.locator(".waiting-chats a")).to_be_visible()
    assert_accessible(tab)


@pytest.mark.parametrize(
    "path",
    [
        "/projects/DEMO/",
        "/projects/DEMO/?layout=board",
        "/projects/DEMO/items/DEMO-1/",
        "/projects/DEMO/knowledge/",
    ],
    ids=["plan-and-graph", "board", "ticket", "knowledge"],
)
def test_the_plan_graph_ticket_and_knowledge_pages_are_accessible(wide_tab, path):
    """Wide, light and dark; at 375 px, light and dark, test_browser_phone.py checks them."""
    response = wide_tab.goto(path)
    assert response is not None
    assert response.status == 200
    assert_accessible(wide_tab)


def test_the_review_with_its_graphs_is_accessible(tab, server):
    from tests.e2e.test_browser_review import propose  # noqa: PLC0415 - that module imports this one

    number, _ = propose(server, "A11y graphs")
    tab.goto(f"/projects/DEMO/changesets/{number}/")
    expect(tab.get_by_role("region", name=re.compile("once applied"))).to_be_visible()
    assert_accessible(tab)


def test_the_keys_page_with_a_new_key_is_accessible(tab):
    tab.goto("/keys/")
    tab.get_by_label("Name").fill("a11y bot")
    tab.get_by_role("button", name="Create key").click()
    expect(tab.get_by_role("heading", name="Your new key “a11y bot”")).to_be_visible()
    expect(tab.get_by_role("row", name=re.compile("a11y bot")).first).to_be_visible()
    assert_accessible(tab)


FOCUSABLE = 'a[href], button:not([disabled]), textarea:not([disabled]), summary, [tabindex="0"]'


def test_every_control_of_the_chat_is_reached_with_tab_and_shows_its_focus_uncovered(
    browser, server, signed_in
):
    context = browser.new_context(base_url=server.url, storage_state=signed_in, viewport=VIEWPORTS["wide"])
    context.set_default_timeout(10_000)
    try:
        page = context.new_page()
        fake = open_chat(page, TRANSCRIPT)
        for frame in REQUESTS:
            fake.send(frame)
        expect(page.locator("#chat-log .request-card.pending")).to_have_count(3)
        page.locator("#chat-log details.tool summary").first.click()  # its scrollable output joins the order
        expect(page.locator("#chat-log .tool-output").first).to_be_visible()
        # The keys the cards name (DEMO-1...) are links once the server confirmed them: counted too.
        expect(page.locator("#chat-log .request-card a.ref").first).to_be_attached()
        page.evaluate("document.activeElement.blur()")
        controls = page.evaluate(
            """(selector) => Array.from(document.querySelectorAll(selector))
                .filter((node) => node.checkVisibility())  // rendered: not in a closed fold
                .map((node, i) => (node.dataset.focusProbe = String(i)))""",
            FOCUSABLE,
        )
        reached: dict[str, dict[str, str]] = {}
        for _ in range(len(controls) + 5):
            page.keyboard.press("Tab")
            focused = page.evaluate(
                """() => {
                    const node = document.activeElement;
                    const style = getComputedStyle(node);
                    const probe = node.dataset.focusProbe || "";
                    const outline = `${style.outlineStyle} ${style.outlineWidth}`;
                    const box = node.getBoundingClientRect();
                    const hit = document.elementFromPoint(box.left + 4, box.top + 4);  // under the composer?
                    const covered = hit !== null && !node.contains(hit) ? hit.outerHTML.slice(0, 40) : "";
                    return { probe, outline, covered, what: node.outerHTML.slice(0, 80) };
                }"""
            )
            if focused["probe"]:
                reached[focused["probe"]] = focused
        assert sorted(reached, key=int) == controls, "not reached with Tab: " + ", ".join(
            sorted(set(controls) - set(reached))
        )
        hidden = [
            f["what"] for f in reached.values() if not re.fullmatch(r"solid [2-9](\.\d+)?px", f["outline"])
        ]
        assert not hidden, f"focus not visible on: {hidden}"
        covered = [(f["what"], f["covered"]) for f in reached.values() if f["covered"]]
        assert not covered, f"focused but covered: {covered}"
    finally:
        context.close()
