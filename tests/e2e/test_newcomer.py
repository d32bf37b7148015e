"""A newcomer's first hour, as the README walks it, on a server with no credential anywhere.

No ``ANTHROPIC_API_KEY`` and no project credential: the chats are answered by the demo planner
(docs/architecture.md#the-demo-planner), and ``ANTHROPIC_BASE_URL`` points at a closed port,
so a call that reached for Anthropic would fail the walk. A real daphne, a real Chromium signed
in as ``demo``: the plan, the seeded changeset applied on its review page, a chat that answers
"what can run next", reads and finds, a proposal applied from its card, the seeded agent's
question answered in its sub-chat while the agent waits over REST, then the agent over MCP
asking, waiting while a human answers, claiming and reporting. Every link on the pages it
visits, and every page the README and docs/agents.md name, answers without an error.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from tests.e2e.chat_page import CHAT_URL, assistant, new_chat, send
from tests.e2e.conftest import agent_key
from tests.e2e.test_mcp import body, mcp_session
from tests.fakes.servers import ROOT, Server, free_port, served

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Ballet with no credential anywhere; Anthropic's address is a port nobody listens on."""
    nowhere = f"http://127.0.0.1:{free_port()}"
    with served(tmp_path_factory.mktemp("newcomer"), nowhere, unset=("ANTHROPIC_API_KEY",)) as server:
        yield server


def links_answer(page: Any, seen: set[str]) -> None:
    """Every same-origin link on the page answers below 400 for the signed-in reader."""
    origin = urlsplit(page.url).netloc
    hrefs = page.eval_on_selector_all(
        "a[href]", "links => links.map(a => new URL(a.getAttribute('href'), document.baseURI).href)"
    )
    for href in hrefs:
        parts = urlsplit(href)
        if parts.netloc != origin or parts.path in seen or parts.path.startswith("/accounts/logout"):
            continue
        seen.add(parts.path)
        response = page.request.get(href.split("#")[0])
        assert response.status < 400, f"{href} on {page.url} answered {response.status}"


def rest_get(server: Server, token: str, path: str) -> Any:
    """A REST GET with the agent's API key, as the agents' manual's curl sends it."""
    request = urllib.request.Request(server.url + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=90) as response:
        return json.loads(response.read())


def ask_over_mcp(server: Server, token: str, question: dict[str, Any], out: list[Any]) -> threading.Thread:
    """The agent's ``ask_question`` with a wait, in a thread of its own (it blocks while a human answers)."""

    async def ask() -> None:
        async with mcp_session(server, token) as session:
            out.append(await session.call_tool("ask_question", question))

    thread = threading.Thread(target=lambda: asyncio.run(ask()))
    thread.start()
    return thread


def test_a_newcomer_walks_the_readme_without_a_key(page, server):
    seen: set[str] = set()

    # Your projects, then the plan.
    page.goto("/")
    page.get_by_role("link", name="Plan of DEMO").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Plan of Courtside")
    expect(page.locator(".graph-scroll svg.graph")).to_be_visible()
    links_answer(page, seen)

    # The seeded changeset: its review and impact, applied with a note.
    page.goto("/projects/DEMO/changesets/")
    page.get_by_role("link", name="#1", exact=True).click()
    expect(page.get_by_role("heading", name=re.compile(r"Changeset #1"))).to_be_visible()
    links_answer(page, seen)
    page.get_by_label("Note").fill("Looks right.")
    page.get_by_role("button", name="Apply changeset #1").click()
    expect(page.locator(".status-badge")).to_have_text("applied")

    # A chat with the demo planner, which says what it is and where the credential goes.
    new_chat(page)
    notice = page.locator("#demo-notice")
    expect(notice).to_contain_text("Demo planner: scripted, no AI model. Set a credential to use Claude.")
    send(page, "What can run next?")
    expect(assistant(page).last).to_contain_text("run now")
    expect(page.locator("#chat-state")).to_have_text("Idle")
    send(page, "show me DEMO-4")
    expect(assistant(page).last).to_contain_text("DEMO-4")
    expect(page.locator("#chat-state")).to_have_text("Idle")
    send(page, "find export")
    # What it searched for, in whichever bubble the page shows it (the results may follow in a
    # bubble of their own, and what they hold depends on how far the search index has come).
    expect(assistant(page).filter(has_text="knowledge base for export").first).to_be_visible()
    expect(page.locator("#chat-state")).to_have_text("Idle")
    send(page, "add a ticket for a printable weekly schedule")
    apply = page.get_by_role("button", name=re.compile(r"Apply changeset #\d+"))
    expect(apply).to_be_visible()
    # Decided once the turn has ended, as each step above waits for its turn: in one CI run under
    # load, a click made while the answer was still arriving sent no request.
    expect(page.locator("#chat-state")).to_have_text("Idle")
    labelled = re.search(r"#(\d+)", apply.get_attribute("aria-label") or "")
    assert labelled is not None
    number = labelled.group(1)
    apply.click()
    card = page.locator(f".changeset-card[data-artifact='changeset:{number}']")
    expect(card).to_have_class(re.compile("status-applied"))
    links_answer(page, seen)
    notice.get_by_role("link").click()
    expect(page.get_by_label("Anthropic API key")).to_be_visible()
    links_answer(page, seen)

    # The agent's question, waiting for a human: answered in its sub-chat while the agent waits.
    token = agent_key(server)
    answers: list[Any] = []
    waiter = threading.Thread(
        target=lambda: answers.append(rest_get(server, token, "/api/v1/projects/DEMO/questions/1/?wait=30"))
    )
    waiter.start()
    page.goto("/projects/DEMO/chat/")
    page.locator(".session-list li.waiting").first.get_by_role("link").click()
    page.wait_for_url(CHAT_URL)
    card = page.locator("#chat-log .request-card.question")
    card.get_by_role("button", name="Include them, marked as cancelled").click()
    expect(page.locator("#question-status")).to_have_text("Answered")
    waiter.join(timeout=60)
    assert len(answers) == 1, "the agent's wait never returned"
    assert answers[0]["status"] == "answered", answers
    assert "Include them, marked as cancelled" in answers[0]["answer"]

    # The agent over MCP: asks and waits while a human answers; then claims and reports.
    asked: list[Any] = []
    question = {"project": "DEMO", "text": "Which timezone do the weekly exports use?", "wait_seconds": 60}
    thread = ask_over_mcp(server, token, question, asked)
    waiting = page.locator(".session-list li.waiting").filter(has_text="timezone")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the list is a page: the new sub-chat shows on a reload
        page.goto("/projects/DEMO/chat/")
        if waiting.count():
            break
        time.sleep(0.5)
    expect(waiting).to_have_count(1)
    waiting.get_by_role("link").click()
    page.wait_for_url(CHAT_URL)
    box = page.locator("#chat-log .request-card.question").get_by_label("Your answer")
    box.fill("UTC, always.")
    box.press("Enter")
    thread.join(timeout=90)
    assert len(asked) == 1, "the agent's MCP wait never returned"
    assert not asked[0].is_error, asked
    answer = body(asked[0])
    assert answer["status"] == "answered", answer
    assert "UTC, always." in answer["answer"]

    async def work() -> tuple[dict[str, Any], dict[str, Any]]:
        async with mcp_session(server, token) as session:
            runnable = body(await session.call_tool("list_runnable", {"project": "DEMO"}))["results"]
            claimed = body(
                await session.call_tool("claim_ticket", {"project": "DEMO", "item": runnable[0]["key"]})
            )
            report = {
                "project": "DEMO",
                "claim": claimed["id"],
                "kind": "done",
                "summary": "Done.",
                "links": ["https://git.example.com/pr/1"],
            }
            return claimed, body(await session.call_tool("report", report))

    done: list[tuple[dict[str, Any], dict[str, Any]]] = []
    worker = threading.Thread(target=lambda: done.append(asyncio.run(work())))  # Playwright holds a loop here
    worker.start()
    worker.join(timeout=60)
    assert len(done) == 1, "claiming and reporting over MCP did not finish"
    claimed, reported = done[0]
    assert claimed["status"] == "active", claimed
    assert (reported["kind"], reported["claim_status"]) == ("done", "done"), reported


def readme_paths() -> list[str]:
    """The pages the README's walk-through and the agents' manual name on the local server."""
    text = (ROOT / "README.md").read_text() + (ROOT / "docs" / "agents.md").read_text()
    found = re.findall(r"http://127\.0\.0\.1:8000(/[^\s)`\"]*)", text)
    found += re.findall(r"`(/(?:projects|api|keys|healthz|metrics)[^`\s]*)`", text)
    paths = []
    for raw in found:
        path = raw.rstrip(".,:")
        if "{" in path or "$" in path or path.startswith("/mcp") or path in paths:
            continue
        paths.append(path)
    return paths


def test_every_page_the_readme_names_answers(page, server):
    paths = readme_paths()
    assert "/api/v1/" in paths, paths
    assert "/projects/DEMO/" in paths, paths
    for path in paths:
        response = page.request.get(path)
        assert response.status < 400, f"{path} answered {response.status}"
    assert json.loads(page.request.get("/api/v1/").text())  # the API's root is JSON
