"""What the browser tests do on the chat page: open a new chat, send a message, read the answers."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

CHAT_URL = re.compile(r"/projects/DEMO/chat/[0-9a-f-]{36}/$")


def new_chat(page: Any) -> None:
    page.goto("/projects/DEMO/chat/")
    page.get_by_role("button", name="New chat").click()
    page.wait_for_url(CHAT_URL)
    expect(page.locator("#chat-connection")).to_have_text("Live")


def send(page: Any, text: str) -> None:
    page.get_by_label("Message to the planner").fill(text)
    page.get_by_label("Message to the planner").press("Enter")


def assistant(page: Any) -> Any:
    return page.locator("#chat-log .entry.assistant .bubble")
