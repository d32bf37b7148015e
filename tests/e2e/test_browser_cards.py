"""Question and approval cards in a real Chromium, fed by a stand-in for the chat's WebSocket.

The page is the real chat page of a real server; its socket is routed to the test
(Playwright's ``route_web_socket``), which plays the server's side of docs/protocol.md: it sends
``request`` frames, reads the ``answer`` frames the cards send, and answers with
``request_resolved`` or ``error``. What the planner's backend does with answers is
tested end to end in ``test_browser_escalation.py``; here, every corner of the cards.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import pytest
from playwright.sync_api import expect

# What a page shows and does, the same in both modes: the embedded mode runs it (tests/conftest.py).
pytestmark = [pytest.mark.browser, pytest.mark.pages]

CHAT_URL = re.compile(r"/projects/DEMO/chat/[0-9a-f-]{36}/$")
EVIL = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'

QUESTION: dict[str, Any] = {
    "type": "request",
    "id": "11111111-1111-4111-8111-111111111111",
    "kind": "question",
    "question": f"Which **database** should the export read? {EVIL}",
    "options": ["PostgreSQL", f"SQLite {EVIL}"],
}
APPROVAL: dict[str, Any] = {
    "type": "request",
    "id": "22222222-2222-4222-8222-222222222222",
    "kind": "approval",
    "tool": "propose_changeset",
    "input": {"title": "Export", "operations": [{"op": "update", "item": "DEMO-1"}]},
    "preview": [
        {"kind": "field", "label": "title", "value": f"Export {EVIL}"},
        {
            "kind": "operation",
            "index": 0,
            "op": "update",
            "label": "Update",
            "subject": "DEMO-1 · Sign-in page",
            "fields": [
                {"name": "title", "current": "Sign-in page", "proposed": f"Login {EVIL}", "changed": True},
                {"name": "state", "current": "draft", "proposed": "draft", "changed": False},
            ],
            "blocker": "",
            "blocked": "",
            "warning": "DEMO-1 is at version 3, but this update was written against version 1: "
            "applying will conflict.",
            "errors": ["base_version: DEMO-1 changed"],
            "raw": "",
        },
        {
            "kind": "operation",
            "index": 1,
            "op": "add_dependency",
            "label": "Add dependency",
            "subject": "",
            "fields": [],
            "blocker": "DEMO-2 · Schema",
            "blocked": "DEMO-1 · Sign-in page",
            "warning": "",
            "errors": [],
            "raw": "",
        },
    ],
}
SECOND_APPROVAL: dict[str, Any] = {
    "type": "request",
    "id": "33333333-3333-4333-8333-333333333333",
    "kind": "approval",
    "tool": "create_knowledge",
    "input": {"kind": "note", "title": "Hi"},
    "preview": [],
}


class FakeSocket:
    """The server's end of the chat's socket: frames to send on connect, answers received."""

    def __init__(self, on_connect: list[dict[str, Any]]) -> None:
        self.on_connect = on_connect
        self.received: list[dict[str, Any]] = []
        self.route: Any = None
        self.lock = threading.Lock()

    def __call__(self, ws: Any) -> None:
        self.route = ws
        ws.on_message(self.receive)
        for frame in self.on_connect:
            ws.send(json.dumps(frame))

    def receive(self, message: str | bytes) -> None:
        with self.lock:
            self.received.append(json.loads(message))

    def send(self, frame: dict[str, Any]) -> None:
        self.route.send(json.dumps(frame))

    def answers(self) -> list[dict[str, Any]]:
        with self.lock:
            return [frame for frame in self.received if frame.get("type") == "answer"]


def open_chat(page: Any, frames: list[dict[str, Any]]) -> FakeSocket:
    fake = FakeSocket([{"type": "state", "state": "paused", "last_seq": 0}, *frames])
    page.route_web_socket(re.compile(r"/ws/planner/sessions/"), fake)
    page.goto("/projects/DEMO/chat/")
    page.get_by_role("button", name="New chat").click()
    page.wait_for_url(CHAT_URL)
    expect(page.locator("#chat-connection")).to_have_text("Live")
    return fake


def card(page: Any, request_id: str) -> Any:
    return page.locator(f'#chat-log .request-card[data-request="{request_id}"]')


def assert_inert(page: Any) -> None:
    assert page.locator("#chat-log img, #chat-log script").count() == 0
    assert page.evaluate("window.__pwned") is None


def test_a_question_card_answers_with_an_option_and_shows_who_answered(page):
    fake = open_chat(page, [QUESTION])
    question = card(page, QUESTION["id"])
    expect(question).to_contain_text("The planner asks")
    expect(question.locator(".request-question strong")).to_have_text("database")
    expect(question.locator(".request-question")).to_contain_text(EVIL)  # as text, never as HTML
    expect(page.locator("#chat-state")).to_have_text("Waiting for an answer")
    expect(page.get_by_label("Message to the planner")).to_have_attribute(
        "placeholder", "A message answers the planner's question"
    )
    options = question.get_by_role("group", name="Answer with an option").get_by_role("button")
    expect(options).to_have_text(["PostgreSQL", f"SQLite {EVIL}"])
    assert_inert(page)

    question.get_by_role("button", name="PostgreSQL").click()
    expect(question.get_by_role("button", name="PostgreSQL")).to_be_disabled()  # sent once, then waits
    assert fake.answers() == [{"type": "answer", "request": QUESTION["id"], "text": "PostgreSQL"}]

    fake.send(
        {
            "type": "request_resolved",
            "id": QUESTION["id"],
            "outcome": "answered",
            "by": "demo",
            "answer": "PostgreSQL",
        }
    )
    expect(question.locator(".request-outcome-line")).to_have_text("Answered by demo")
    expect(question.locator(".request-answer")).to_have_text("PostgreSQL")
    expect(question.get_by_role("button")).to_have_count(0)
    expect(page.locator("#chat-state")).to_have_text("Thinking…")  # the turn resumes
    expect(page.get_by_label("Message to the planner")).to_have_attribute(
        "placeholder", re.compile("running")
    )


def test_a_typed_answer_is_sent_with_enter_from_the_keyboard(page):
    fake = open_chat(page, [{**QUESTION, "options": []}])
    question = card(page, QUESTION["id"])
    box = question.get_by_label("Your answer")
    box.focus()
    page.keyboard.press("Enter")  # nothing typed: nothing sent
    box.press_sequentially("Read the replica,")
    box.press("Shift+Enter")
    box.press_sequentially("never the primary.")
    box.press("Enter")
    expect(box).to_be_disabled()
    assert fake.answers() == [
        {"type": "answer", "request": QUESTION["id"], "text": "Read the replica,\nnever the primary."}
    ]


def test_an_approval_card_shows_the_operations_as_the_review_does_and_approves(page):
    fake = open_chat(page, [APPROVAL])
    approval = card(page, APPROVAL["id"])
    expect(approval.locator(".card-title")).to_have_text("The planner wants to run propose_changeset")
    expect(page.locator("#chat-state")).to_have_text("Waiting for approval")
    expect(page.get_by_label("Message to the planner")).to_have_attribute(
        "placeholder", "A message declines the pending approval (the message is the reason)"
    )
    expect(approval.locator(".preview-fields dd")).to_have_text(f"Export {EVIL}")
    update = approval.locator('.preview-op[data-op="update"]')
    expect(update.locator("h4")).to_have_text("1. Update: DEMO-1 · Sign-in page")
    expect(update.locator(".op-warning")).to_contain_text("applying will conflict")
    expect(update.locator(".op-errors li")).to_have_text(["base_version: DEMO-1 changed"])
    expect(update.locator("tr").nth(0)).to_contain_text(f"Sign-in page→Login {EVIL}")
    expect(update.locator("tr").nth(1).locator(".after")).to_have_text("draft (unchanged)")
    expect(approval.locator('.preview-op[data-op="add_dependency"] .dependency')).to_have_text(
        "DEMO-1 · Sign-in page will wait for DEMO-2 · Schema"
    )
    assert_inert(page)

    approval.get_by_role("button", name="Approve").click()
    assert fake.answers() == [{"type": "answer", "request": APPROVAL["id"], "approve": True}]
    fake.send({"type": "request_resolved", "id": APPROVAL["id"], "outcome": "approved", "by": "demo"})
    expect(approval.locator(".request-outcome-line")).to_have_text("Approved by demo")
    expect(approval.get_by_role("button")).to_have_count(0)
    expect(approval.locator(".request-preview")).to_be_hidden()  # folded once decided
    approval.get_by_text("What it asked to run").click()
    expect(approval.locator(".request-preview")).to_be_visible()


def test_decline_sends_the_reason_and_a_refused_answer_gives_the_controls_back(page):
    fake = open_chat(page, [APPROVAL, SECOND_APPROVAL])
    first, second = card(page, APPROVAL["id"]), card(page, SECOND_APPROVAL["id"])
    expect(second.locator(".request-preview pre")).to_contain_text('"title": "Hi"')  # no preview: the JSON

    # A knowledge write waits as a draft: Publish and Discard (docs/domain.md#knowledge-cards).
    expect(second.locator(".card-kicker")).to_have_text("Knowledge draft — publish or discard")
    second.get_by_role("button", name="Publish").click()
    fake.send({"type": "error", "code": "not_pending", "message": "That request is no longer pending."})
    expect(page.locator("#chat-toasts")).to_contain_text("no longer pending")
    expect(second.get_by_role("button", name="Publish")).to_be_enabled()

    reason = first.get_by_label("Reason for declining (optional)")
    reason.fill("Not before the schema lands.")
    reason.press("Tab")
    page.keyboard.press("Enter")  # Decline, reached from the keyboard
    expect(reason).to_be_disabled()
    assert fake.answers()[-1] == {
        "type": "answer",
        "request": APPROVAL["id"],
        "approve": False,
        "reason": "Not before the schema lands.",
    }
    fake.send(
        {
            "type": "request_resolved",
            "id": APPROVAL["id"],
            "outcome": "declined",
            "by": "demo",
            "answer": "Not before the schema lands.",
        }
    )
    expect(first.locator(".request-outcome-line")).to_have_text("Declined by demo")
    expect(first.locator(".request-answer")).to_have_text("Reason: Not before the schema lands.")
    expect(page.locator("#chat-state")).to_have_text("Waiting for approval")  # the second still waits
    second.get_by_role("button", name="Discard").click()
    assert fake.answers()[-1] == {"type": "answer", "request": SECOND_APPROVAL["id"], "approve": False}


def test_a_request_frame_sent_again_on_reconnect_keeps_the_card_and_what_was_typed(page):
    fake = open_chat(page, [{**QUESTION, "options": []}])
    question = card(page, QUESTION["id"])
    question.get_by_label("Your answer").fill("half an answer")
    fake.send({"type": "request", **{k: v for k, v in QUESTION.items() if k != "type"}, "options": []})
    fake.send({"type": "state", "state": "paused", "last_seq": 0})
    expect(page.locator("#chat-log .request-card")).to_have_count(1)
    expect(question.get_by_label("Your answer")).to_have_value("half an answer")
    expect(page.locator("#chat-state")).to_have_text("Waiting for an answer")


def test_cards_fit_a_narrow_screen(browser, server, signed_in):
    wide = {
        **APPROVAL,
        "preview": [*APPROVAL["preview"], {"kind": "field", "label": "x" * 80, "value": "y" * 400}],
    }
    context = browser.new_context(
        base_url=server.url, storage_state=signed_in, viewport={"width": 375, "height": 740}
    )
    try:
        page = context.new_page()
        open_chat(page, [wide, {**QUESTION, "options": ["A rather long option " * 6, "B"]}])
        expect(page.locator("#chat-log .request-card")).to_have_count(2)
        page.screenshot(path="/tmp/ballet-cards-375.png", full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= 375
        decline = page.get_by_role("button", name="Decline").bounding_box()
        assert decline is not None
        assert decline["x"] + decline["width"] <= 375
    finally:
        context.close()
