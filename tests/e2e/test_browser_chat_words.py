"""The chat in words, in a real Chromium (docs/protocol.md): tool folds say what the planner did, a
call waiting for a human says so on its fold, what others changed reads as a line, an agent's
sub-chat opens with its question as asked, and the spend line says tokens with the cached ones
apart, as the usage records add up."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.chat_page import CHAT_URL, assistant, new_chat, send
from tests.e2e.conftest import shell
from tests.fakes.messages_api import Reply, TextReply, ToolCallSpec, ToolUseReply, Usage

# What a page shows and does, the same in both modes: the embedded mode runs it (tests/conftest.py).
pytestmark = [pytest.mark.browser, pytest.mark.pages]

A_TICKET = (
    "from tracker.models import Item; "
    "print(Item.objects.filter(project__key='DEMO', kind='ticket').order_by('pk').first().key)"
)
EDIT = """
from django.contrib.auth.models import User
from tracker.models import Item
from tracker.services.activity import Actor
from tracker.services.items import item_update
item = Item.objects.get(project__key="DEMO", number={number})
demo = Actor(user=User.objects.get(username="demo"))
item_update(actor=demo, item=item, fields={{"description": "Edited aside."}})
print("ok")
"""


def test_tool_folds_say_what_was_done_live_and_after_a_reload(page, script, server):
    key = shell(server, A_TICKET)
    script.on(
        "words-please",
        ToolUseReply(
            [ToolCallSpec("get_item", {"key": key}), ToolCallSpec("get_item", {"key": "DEMO-9999"})]
        ),
        ToolUseReply([ToolCallSpec("search_project", {"query": "export"})]),
        TextReply("Read them."),
    )
    new_chat(page)
    send(page, "words-please: read the tickets")
    expect(assistant(page)).to_have_text("Read them.")
    folds = page.locator("#chat-log details.tool summary .tool-label")
    words = [f"Read {key}", "Could not read DEMO-9999", "Searched the project for “export”"]
    expect(folds).to_have_text(words)
    expect(page.locator("#chat-log details.tool.failed .tool-label")).to_have_text("Could not read DEMO-9999")

    page.reload()  # the transcript says the same
    expect(folds).to_have_text(words)
    fold = page.locator("#chat-log details.tool").first
    fold.locator("summary").click()  # input and output stay inside
    expect(fold.locator(".tool-called")).to_have_text("Tool get_item")
    expect(fold.locator(".tool-input")).to_contain_text(f'"key": "{key}"')


def asks_then_says(request: dict[str, Any]) -> Reply:
    for message in request.get("messages", []):
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_result":
                text = block["content"] if isinstance(block["content"], str) else block["content"][0]["text"]
                return TextReply(f"You said {json.loads(text)['answer']}.")
    return ToolUseReply([ToolCallSpec("ask_human", {"question": "Ship Friday?", "options": ["Yes", "No"]})])


def test_a_waiting_ask_human_fold_waits_for_the_answer(page, script):
    script.on("wait-words", asks_then_says)
    new_chat(page)
    send(page, "wait-words: can we ship?")
    fold = page.locator("#chat-log details.tool")
    expect(fold.locator(".tool-label")).to_have_text("Asking a question…")
    expect(fold.locator(".tool-status")).to_have_text("Waiting for your answer")  # not "running…"
    expect(fold).to_have_class("tool waiting")

    page.reload()  # from the transcript's pending request, tied by its tool_use_id
    expect(fold.locator(".tool-status")).to_have_text("Waiting for your answer")

    page.locator("#chat-log .request-card").get_by_role("button", name="Yes").click()
    expect(assistant(page)).to_have_text("You said Yes.")
    expect(fold.locator(".tool-label")).to_have_text("Asked a question")
    expect(fold.locator(".tool-status")).to_have_text("")
    expect(fold).to_have_class("tool done")


def test_what_others_changed_reads_as_a_line_with_links(page, script, server):
    key = shell(server, A_TICKET)
    script.on("notes-first", TextReply("First."))
    script.on("notes-second", TextReply("Second."))
    new_chat(page)
    send(page, "notes-first: hello")
    expect(assistant(page)).to_have_text("First.")
    assert shell(server, EDIT.format(number=key.split("-")[1])) == "ok"  # demo edits a ticket elsewhere
    send(page, "notes-second: and now?")
    expect(assistant(page).last).to_have_text("Second.")

    page.reload()
    line = page.locator("#chat-log .changes-note .changes-summary").last
    expect(line).to_contain_text(f"Workspace changes: {key} edited by demo (description)")
    expect(line.locator("a.ref").first).to_have_attribute("href", f"/projects/DEMO/items/{key}/")
    told = page.locator("#chat-log .changes-note details").last
    told.locator("summary").click()
    expect(told.locator("pre")).to_contain_text("<workspace-changes>")


def test_an_agents_sub_chat_opens_with_its_question_not_the_models_instruction(page):
    page.goto("/projects/DEMO/chat/")
    page.locator(".session-list li").filter(has_text="Question from agent").first.get_by_role("link").click()
    page.wait_for_url(CHAT_URL)
    first = page.locator("#chat-log .entry").first
    expect(first).to_have_class("entry user kind-question")
    expect(first.locator(".meta")).to_contain_text("Question from agent about DEMO-")
    banner = page.locator(".question-banner .question-text").inner_text()
    expect(first.locator(".bubble")).to_have_text(banner)
    expect(page.locator("#chat-log")).not_to_contain_text("answer_question tool")
    expect(page.locator("#chat-log details.tool .tool-status")).to_have_text("Waiting for your answer")


def test_the_spend_line_says_tokens_with_the_cached_apart(page, script):
    script.on("cache-me", TextReply("Cached.", usage=Usage(1_000, 200, 300, 4_000)))
    new_chat(page)
    send(page, "cache-me: how much?")
    expect(assistant(page)).to_have_text("Cached.")

    today = page.request.get("/api/v1/projects/DEMO/usage/").json()["today"]
    parts = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    assert today["tokens"] == sum(today[name] for name in parts)  # the figure counts every token
    assert today["cached_tokens"] >= 4_300
    figure = page.locator("#spend-figure")
    # The chat's title is proposed (and metered) after the answer: the figures may grow by its tokens.
    expect(figure).to_have_text(
        re.compile(r"^[\d,]+ tokens \([\d,]+ cached\) · (≈ \$\d+\.\d\d|< \$0\.01) · ")
    )
    expect(figure).to_contain_text(
        re.compile(r"this chat 5,[5-9]\d\d tokens \(4,300 cached\), (≈ \$0\.\d\d|< \$0\.01)")
    )
