"""The chat from the keyboard, in a real Chromium: Esc stops a running turn, ↑ takes back a
message still queued for the planner.

Against a real server and the fake Messages API (``conftest.Script``), except the refusals of a
retract, which need the planner to read a message in the instant between ↑ and the server: a
stand-in for the chat's socket (``test_browser_cards.FakeSocket``) plays the server's side there.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.chat_page import assistant, new_chat, send
from tests.e2e.test_browser_cards import open_chat
from tests.fakes.messages_api import FakeMessagesAPI, HangReply, TextReply, ToolCallSpec, ToolUseReply

# What a page shows and does, the same in both modes: the embedded mode runs it (tests/conftest.py).
pytestmark = [pytest.mark.browser, pytest.mark.pages]


def sent_frames(page: Any) -> list[dict[str, Any]]:
    """The frames the page will send on its chat socket, as they go (register before opening)."""
    frames: list[dict[str, Any]] = []

    def on_socket(ws: Any) -> None:
        if "/ws/planner/" in ws.url:
            ws.on("framesent", lambda payload: frames.append(json.loads(payload)))

    page.on("websocket", on_socket)
    return frames


def box(page: Any) -> Any:
    return page.get_by_label("Message to the planner")


def texts_sent_to_the_model(fake_api: FakeMessagesAPI) -> str:
    return "\n".join(request.body.decode() for request in fake_api.requests)


def test_escape_stops_a_running_turn_from_the_page_and_the_composer_but_not_from_a_fold(page, script):
    script.on(
        "esc-first",
        ToolUseReply([ToolCallSpec("list_runnable", {"limit": 2})]),
        HangReply(after_deltas=1, reply=TextReply(chunks=["Partial one. ", "Never shown."])),
    )
    script.on("esc-second", HangReply(after_deltas=1, reply=TextReply(chunks=["Again. ", "Never shown."])))
    frames = sent_frames(page)
    new_chat(page)
    box(page).press("Escape")  # nothing runs: nothing is sent
    send(page, "esc-first: write forever")
    expect(assistant(page)).to_have_text("Partial one.")
    expect(page.locator("#chat-state")).to_have_text("Writing…")
    assert [f["type"] for f in frames] == ["message"]

    summary = page.locator("#chat-log details.tool summary")
    summary.focus()
    page.keyboard.press("Enter")
    page.keyboard.press("Escape")  # focus in a fold: Esc is not the page's
    expect(page.locator("#chat-log details.tool")).to_have_attribute("open", "")
    expect(page.locator("#chat-state")).to_have_text("Writing…")

    page.evaluate("document.activeElement.blur()")  # the page itself has the focus
    page.keyboard.press("Escape")
    expect(page.locator("#chat-log .notice-line.stopped")).to_have_text("Stopped")
    expect(page.locator("#chat-state")).to_have_text("Idle")
    assert [f["type"] for f in frames] == ["message", "stop"]

    send(page, "esc-second: once more")
    expect(assistant(page).last).to_have_text("Again.")
    box(page).fill("half a thought")
    box(page).press("Escape")  # from the composer, with text in it
    expect(page.locator("#chat-log .notice-line.stopped")).to_have_count(2)
    expect(box(page)).to_have_value("half a thought")  # kept
    page.keyboard.press("Escape")  # nothing runs any more: nothing more is sent
    assert [f["type"] for f in frames] == ["message", "stop", "message", "stop"]


def test_arrow_up_takes_back_a_queued_message_to_edit_and_the_planner_never_reads_it(page, script, fake_api):
    release = threading.Event()
    script.on(
        "edit-queued",
        HangReply(after_deltas=1, release=release, reply=TextReply(chunks=["Working on it. ", "Done."])),
        TextReply("Noted the risks."),
    )
    new_chat(page)
    send(page, "edit-queued: plan the beta")
    expect(assistant(page)).to_have_text("Working on it.")
    box(page).press("ArrowUp")  # nothing queued: an ordinary key
    expect(box(page)).to_have_value("")
    send(page, "also check the blockers")
    queued = page.locator("#chat-log .entry.queued")
    expect(queued.locator(".bubble")).to_have_text("also check the blockers")

    box(page).press("ArrowUp")
    expect(box(page)).to_have_value("also check the blockers")
    expect(queued).to_have_count(0)
    expect(box(page)).to_be_focused()
    assert box(page).evaluate("b => [b.selectionStart, b.selectionEnd]") == [23, 23]  # the caret at the end
    expect(page.locator("#composer-status")).to_have_text(re.compile("back in the box"))

    box(page).press("Backspace")
    box(page).press_sequentially(" and the risks?")  # edited, and sent again
    box(page).press("Enter")
    expect(queued.locator(".bubble")).to_have_text("also check the blocker and the risks?")
    release.set()
    expect(assistant(page).last).to_have_text("Noted the risks.")
    expect(page.locator("#chat-state")).to_have_text("Idle")
    expect(page.locator("#chat-log .entry.kind-steer .bubble")).to_have_text(
        ["also check the blocker and the risks?"]
    )
    sent = texts_sent_to_the_model(fake_api)
    assert "also check the blocker and the risks?" in sent
    assert "also check the blockers" not in sent
    page.reload()
    expect(page.locator("#chat-log .entry.user .bubble")).to_have_text(
        ["edit-queued: plan the beta", "also check the blocker and the risks?"]
    )


def test_a_queued_message_is_shown_after_a_reload_and_still_taken_back(page, script, fake_api):
    release = threading.Event()
    script.on(
        "reload-queued",
        HangReply(after_deltas=1, release=release, reply=TextReply(chunks=["Working. ", "Done."])),
    )
    new_chat(page)
    send(page, "reload-queued: plan the beta")
    expect(assistant(page)).to_have_text("Working.")
    send(page, "mind the holidays")
    queued = page.locator("#chat-log .entry.queued")
    expect(queued.locator(".bubble")).to_have_text("mind the holidays")

    page.reload()  # the queue is the server's: the page shows it again, below the running turn's replay
    expect(page.locator("#chat-connection")).to_have_text("Live")
    expect(assistant(page)).to_have_text("Working.")
    expect(queued.locator(".bubble")).to_have_text("mind the holidays")
    expect(page.locator("#chat-log > .entry").last).to_have_class(re.compile(r"\bqueued\b"))
    box(page).press("ArrowUp")
    expect(box(page)).to_have_value("mind the holidays")
    expect(queued).to_have_count(0)
    release.set()
    expect(page.locator("#chat-state")).to_have_text("Idle")
    expect(assistant(page).last).to_have_text("Working. Done.")
    assert "mind the holidays" not in texts_sent_to_the_model(fake_api)


RUNNING: list[dict[str, Any]] = [
    {"type": "user_message", "seq": 1, "text": "Plan the beta", "author": "demo", "kind": "human"},
    {"type": "turn_started", "turn": 1, "continued": False},
    {"type": "text_delta", "text": "Working on it."},
]


def test_a_retract_refused_once_the_planner_read_the_message_loses_nothing(page):
    fake = open_chat(page, RUNNING)
    expect(page.locator("#chat-state")).to_have_text("Writing…")
    send(page, "also check the blockers")
    queued = page.locator("#chat-log .entry.queued")
    expect(queued).to_have_count(1)
    box(page).press("ArrowUp")
    expect(queued).to_have_class(re.compile("retracting"))
    assert [f["type"] for f in fake.received] == ["message", "retract"]
    box(page).press("ArrowUp")  # one retract at a time
    assert [f["type"] for f in fake.received] == ["message", "retract"]

    message = "Nothing of yours waits for the planner any more: it already read your last message."
    fake.send({"type": "error", "code": "not_queued", "message": message})
    expect(page.locator("#chat-toasts")).to_contain_text("already read your last message")
    expect(box(page)).to_have_value("")  # nothing put back: the planner has it
    expect(queued).not_to_have_class(re.compile("retracting"))
    fake.send(
        {
            "type": "user_message",
            "seq": 2,
            "text": "also check the blockers",
            "author": "demo",
            "kind": "steer",
        }
    )
    expect(queued).to_have_count(0)
    expect(page.locator("#chat-log .entry.kind-steer .bubble")).to_have_text("also check the blockers")
    expect(box(page)).to_have_value("")


@pytest.mark.parametrize(
    ("became", "box_after"),
    [("taken back", "also check the blockers"), ("still queued", ""), ("read by the planner", "")],
)
def test_a_retract_whose_answer_a_dropped_socket_lost_is_settled_by_the_transcript(page, became, box_after):
    """The socket closed between ↑ and the server's answer: the transcript the page reloads says
    whether the message was taken back (its text comes back to the box), still waits, or was read."""
    fake = open_chat(page, RUNNING)
    send(page, "also check the blockers")
    queued = page.locator("#chat-log .entry.queued")
    box(page).press("ArrowUp")
    expect(queued).to_have_class(re.compile("retracting"))

    def transcript(route: Any) -> None:
        response = route.fetch()
        body = response.json()
        body["state"] = "running"
        body["queued"] = ["also check the blockers"] if became == "still queued" else []
        if became == "read by the planner":
            text = [{"type": "text", "text": "also check the blockers"}]
            at = "2026-01-01T00:00:00Z"
            body["messages"] += [
                {
                    "seq": 1,
                    "role": "user",
                    "kind": "human",
                    "turn": 1,
                    "author": "demo",
                    "content": [{"type": "text", "text": "Plan the beta"}],
                    "created_at": at,
                },
                {
                    "seq": 2,
                    "role": "user",
                    "kind": "steer",
                    "turn": 1,
                    "author": "demo",
                    "content": text,
                    "created_at": at,
                },
            ]
        route.fulfill(response=response, json=body)

    page.route(re.compile(r"/api/v1/planner/sessions/[0-9a-f-]+/?$"), transcript)
    fake.route.close(code=1011)
    expect(page.locator("#chat-connection")).to_have_text("Live")
    expect(box(page)).to_have_value(box_after)
    expect(page.locator("#chat-log .entry.queued")).to_have_count(1 if became == "still queued" else 0)
    expect(page.locator("#chat-log .entry.retracting")).to_have_count(0)
    box(page).fill("")
    box(page).press("ArrowUp")  # a retract may be sent again: none is in flight
    assert [f["type"] for f in fake.received].count("retract") == (2 if became == "still queued" else 1)


def test_a_retraction_from_elsewhere_drops_the_bubble_and_leaves_the_box_alone(page):
    fake = open_chat(page, RUNNING)
    send(page, "first note")
    send(page, "second note")
    queued = page.locator("#chat-log .entry.queued .bubble")
    expect(queued).to_have_text(["first note", "second note"])
    box(page).fill("typing something else")
    fake.send({"type": "steer_retracted", "n": 99, "text": "second note"})  # another tab took it back
    expect(queued).to_have_text(["first note"])
    expect(box(page)).to_have_value("typing something else")
    assert [f["type"] for f in fake.received] == ["message", "message"]


def test_escape_in_a_field_of_its_own_keeps_its_meaning(page):
    fake = open_chat(page, RUNNING)
    expect(page.locator("#chat-state")).to_have_text("Writing…")
    # A field another control owns (a rename box, say): its Esc is its own.
    page.evaluate(
        """() => {
            const field = document.createElement("input");
            field.id = "probe-field";
            field.setAttribute("aria-label", "Probe");
            document.querySelector(".chat-head").append(field);
        }"""
    )
    page.locator("#probe-field").press("Escape")
    send(page, "a note")  # goes out behind any stop that Esc would have sent
    expect(page.locator("#chat-log .entry.queued")).to_have_count(1)
    expect(page.locator("#chat-state")).to_have_text("Writing…")
    page.locator("#probe-field").focus()
    page.locator("#probe-field").blur()
    page.keyboard.press("Escape")
    expect(page.locator("#chat-state")).to_have_text("Stopping…")
    assert [f["type"] for f in fake.received] == ["message", "stop"]
