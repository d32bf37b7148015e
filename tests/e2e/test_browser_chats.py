"""Chats in a real Chromium (docs/protocol.md): rename and archive from the chat page, the title the
planner proposes after the first turn arriving live, and the chat list's search.

The model is the fake Messages API (``conftest.Script``); the title request is answered from
:meth:`conftest.Script.titled` for the keyword of the chat's first message.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.chat_page import CHAT_URL, assistant, new_chat, send
from tests.e2e.conftest import VIEWPORTS
from tests.fakes.messages_api import HangReply, TextReply

# What a page shows and does, the same in both modes: the embedded mode runs it (tests/conftest.py).
pytestmark = [pytest.mark.browser, pytest.mark.pages]

LIST_URL = re.compile(r"/projects/DEMO/chat/$")


def heading(page: Any) -> Any:
    return page.locator("#chat-title")


def rename(page: Any, title: str, *, saved: bool = True) -> None:
    page.get_by_role("button", name="Rename").click()
    box = page.get_by_label("Chat title", exact=True)
    expect(box).to_be_focused()
    box.fill(title)
    if not saved:  # refused in the page: nothing is sent
        box.press("Enter")
        return
    # Saved before the test goes on: leaving the page at once (a new chat) would abort the save.
    with page.expect_response(lambda r: r.request.method == "PATCH" and r.ok):
        box.press("Enter")


def test_the_planners_title_appears_after_the_first_turn_without_a_reload(page, script):
    script.on("titles-first", TextReply("We can plan the spring release in three steps."))
    script.titled("titles-first", TextReply('"Spring release plan."'))
    new_chat(page)
    page.evaluate("window.__sameDocument = true")
    send(page, "titles-first: how do we plan the spring release?")
    expect(assistant(page)).to_have_text("We can plan the spring release in three steps.")
    expect(heading(page)).to_have_text("Spring release plan")  # untrusted text, trimmed
    expect(page).to_have_title(re.compile(r"^Spring release plan · DEMO"))
    assert page.evaluate("window.__sameDocument") is True  # no reload brought it
    page.reload()
    expect(heading(page)).to_have_text("Spring release plan")


def test_rename_in_place_persists_and_esc_cancels(page):
    new_chat(page)
    rename(page, "  Quarterly capacity  ")
    expect(heading(page)).to_have_text("Quarterly capacity")
    expect(page.get_by_label("Chat title", exact=True)).to_be_hidden()
    expect(page).to_have_title(re.compile(r"^Quarterly capacity · DEMO"))

    page.get_by_role("button", name="Rename").click()
    page.get_by_label("Chat title", exact=True).fill("Not this one")
    page.get_by_label("Chat title", exact=True).press("Escape")
    expect(heading(page)).to_have_text("Quarterly capacity")
    expect(page.get_by_role("button", name="Rename")).to_be_focused()

    rename(page, "   ", saved=False)  # refused: the error is shown, the input stays open
    expect(page.locator("#rename-error")).to_have_text("Write a title.")
    expect(page.get_by_label("Chat title", exact=True)).to_have_attribute("aria-invalid", "true")
    page.get_by_role("button", name="Cancel").click()
    expect(heading(page)).to_have_text("Quarterly capacity")

    page.reload()
    expect(heading(page)).to_have_text("Quarterly capacity")
    page.goto("/projects/DEMO/chat/")
    expect(page.get_by_role("link", name=re.compile("Quarterly capacity"))).to_be_visible()


def test_archive_asks_first_then_the_chat_leaves_the_list(page, script):
    script.on("archive-me", TextReply("Noted."))
    new_chat(page)
    send(page, "archive-me: a chat to archive")
    expect(assistant(page)).to_have_text("Noted.")
    chat_url = page.url
    rename(page, "Archived capacity talk")
    expect(heading(page)).to_have_text("Archived capacity talk")

    page.get_by_role("button", name="Archive", exact=True).click()
    expect(page.get_by_text("Archive this chat?")).to_be_visible()
    page.get_by_role("button", name="Keep it").click()
    expect(page.get_by_text("Archive this chat?")).to_be_hidden()
    page.reload()
    expect(heading(page)).to_have_text("Archived capacity talk")  # still here: nothing archived

    page.get_by_role("button", name="Archive", exact=True).click()
    page.get_by_role("button", name="Yes, archive it").click()
    page.wait_for_url(LIST_URL)
    expect(page.get_by_role("heading", name="Planner chats")).to_be_visible()
    expect(page.get_by_role("link", name=re.compile("Archived capacity talk"))).to_have_count(0)
    page.reload()
    expect(page.get_by_role("link", name=re.compile("Archived capacity talk"))).to_have_count(0)

    page.goto(chat_url)  # the transcript stays readable by its address
    expect(assistant(page)).to_have_text("Noted.")
    expect(page.get_by_text("This chat was archived on")).to_be_visible()
    expect(page.get_by_label("Message to the planner")).to_have_count(0)
    expect(page.get_by_role("button", name="Archive", exact=True)).to_have_count(0)


def test_search_the_chat_list_by_title(page):
    for title in ("Search target alpha", "Search target beta", "Something else"):
        new_chat(page)
        rename(page, title)
        expect(heading(page)).to_have_text(title)
    page.goto("/projects/DEMO/chat/")
    page.get_by_label("Search chats by title").fill("TARGET")
    page.get_by_role("button", name="Search").click()
    expect(page).to_have_url(re.compile(r"\?q=TARGET$"))
    expect(page.get_by_role("link", name=re.compile("Search target"))).to_have_count(2)
    expect(page.get_by_role("link", name=re.compile("Something else"))).to_have_count(0)

    page.get_by_label("Search chats by title").fill("no such chat")
    page.get_by_label("Search chats by title").press("Enter")
    expect(page.get_by_text("No chat in DEMO has a title containing “no such chat”.")).to_be_visible()
    page.get_by_role("link", name="Show all chats").click()
    expect(page.get_by_role("link", name=re.compile("Something else"))).to_be_visible()
    assert CHAT_URL.search(page.url) is None


def test_an_archived_chat_is_found_among_the_archived_and_unarchived(page, script):
    script.on("bring-back", TextReply("Back in business."))
    new_chat(page)
    rename(page, "Chat to bring back")
    expect(heading(page)).to_have_text("Chat to bring back")
    chat_url = page.url
    page.get_by_role("button", name="Archive", exact=True).click()
    page.get_by_role("button", name="Yes, archive it").click()
    page.wait_for_url(LIST_URL)
    expect(page.get_by_role("link", name=re.compile("Chat to bring back"))).to_have_count(0)

    page.get_by_role("link", name="Archived chats").click()
    expect(page).to_have_url(re.compile(r"\?archived=1$"))
    expect(page.get_by_role("link", name=re.compile("Chat to bring back"))).to_be_visible()
    page.get_by_role("button", name="Unarchive Chat to bring back").click()
    page.wait_for_url(chat_url)
    expect(page.get_by_text("This chat was archived on")).to_have_count(0)
    send(page, "bring-back: are you there?")
    expect(assistant(page)).to_have_text("Back in business.")
    page.goto("/projects/DEMO/chat/")
    expect(page.get_by_role("link", name=re.compile("Chat to bring back"))).to_be_visible()


def test_an_archived_chats_own_page_unarchives_it(page):
    new_chat(page)
    chat_url = page.url
    page.get_by_role("button", name="Archive", exact=True).click()
    page.get_by_role("button", name="Yes, archive it").click()
    page.wait_for_url(LIST_URL)
    page.goto(chat_url)
    expect(page.get_by_label("Message to the planner")).to_have_count(0)
    page.get_by_role("button", name="Unarchive").click()
    page.wait_for_url(chat_url)
    expect(page.get_by_label("Message to the planner")).to_be_visible()


def phone(browser: Any, server: Any, signed_in: str) -> Any:
    context = browser.new_context(base_url=server.url, storage_state=signed_in, viewport=VIEWPORTS["375"])
    context.set_default_timeout(10_000)
    return context


def test_recent_chats_fold_behind_a_button_on_a_phone(browser, server, signed_in):
    context = phone(browser, server, signed_in)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    new_chat(tab)
    rename(tab, "Phone chat one")
    new_chat(tab)
    rename(tab, "Phone chat two")
    expect(heading(tab)).to_have_text("Phone chat two")
    tab.reload()  # the sidebar is the page's as it loaded: with both titles now

    toggle = tab.get_by_role("button", name="Recent chats")
    recent = tab.locator("#recent-chats")
    expect(recent).to_be_hidden()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.focus()
    tab.keyboard.press("Enter")
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(recent).to_be_visible()
    current = recent.get_by_role("link", name=re.compile("Phone chat two"))
    expect(current).to_have_attribute("aria-current", "page")
    other = recent.get_by_role("link", name=re.compile("Phone chat one"))
    expect(other).not_to_have_attribute("aria-current", "page")
    tab.keyboard.press("Tab")  # into the list, by keyboard
    tab.keyboard.press("Escape")
    expect(recent).to_be_hidden()
    expect(toggle).to_be_focused()
    assert tab.evaluate("document.documentElement.scrollWidth <= window.innerWidth")  # no sideways scroll

    toggle.click()
    other.click()
    expect(heading(tab)).to_have_text("Phone chat one")
    context.close()
    assert not errors, errors


def test_recent_chats_sit_beside_the_conversation_on_a_wide_screen(page):
    new_chat(page)
    rename(page, "Wide chat")
    expect(heading(page)).to_have_text("Wide chat")
    recent = page.locator("#recent-chats")
    # The open chat's entry follows its heading without a reload.
    expect(recent.get_by_role("link", name=re.compile("Wide chat"))).to_have_attribute("aria-current", "page")
    page.reload()
    expect(page.get_by_role("button", name="Recent chats")).to_be_hidden()
    expect(recent.get_by_role("link", name=re.compile("Wide chat"))).to_have_attribute("aria-current", "page")
    sidebar = page.locator("#chat-sidebar").bounding_box()
    log = page.locator("#chat-log").bounding_box()
    assert sidebar is not None
    assert log is not None
    assert sidebar["x"] + sidebar["width"] <= log["x"]  # beside it, not above it


def test_one_send_or_stop_button_on_a_phone(browser, server, signed_in, script):
    script.on(
        "phone-stop", HangReply(None, after_deltas=1, reply=TextReply(chunks=["Thinking hard. ", "Done."]))
    )
    context = phone(browser, server, signed_in)
    tab = context.new_page()
    new_chat(tab)
    send_button = tab.get_by_role("button", name="Send")
    stop_button = tab.get_by_role("button", name="Stop")
    expect(send_button).to_be_visible()
    expect(stop_button).to_be_hidden()
    send(tab, "phone-stop: think")
    expect(assistant(tab)).to_have_text("Thinking hard.")
    expect(stop_button).to_be_visible()
    expect(send_button).to_be_hidden()
    stop_button.click()
    expect(tab.locator("#chat-log .notice-line.stopped")).to_have_text("Stopped")
    expect(send_button).to_be_visible()
    expect(stop_button).to_be_hidden()
    context.close()


def test_both_buttons_on_a_wide_screen(page):
    new_chat(page)
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
