"""What the browser tests do on the chat page: open a new chat, send a message, read the answers,
hold the page's socket connecting."""

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


# Every socket the page opens stays "connecting" for the page until the test lets its open
# event through (window.__held: one release per socket), however fast the server is; the
# sockets are in window.__sockets.
HOLD_OPEN = """(() => {
  const Real = window.WebSocket;
  window.__held = [];
  window.__sockets = [];
  window.WebSocket = class extends Real {
    constructor(...args) {
      super(...args);
      window.__sockets.push(this);
      this.__opened = false;
      this.__openers = [];
      super.addEventListener("open", (event) => window.__held.push(() => {
        this.__opened = true;
        for (const listener of this.__openers) listener(event);
      }));
    }
    get readyState() {
      const state = super.readyState;
      return state === Real.OPEN && !this.__opened ? Real.CONNECTING : state;
    }
    addEventListener(type, listener, options) {
      if (type === "open") this.__openers.push(listener);
      else super.addEventListener(type, listener, options);
    }
  };
})();"""


def release_open(page: Any) -> None:
    """Let the page see its socket open, once the socket has opened."""
    for _ in range(100):
        if page.evaluate("window.__held.length"):
            page.evaluate("window.__held.shift()()")
            return
        page.wait_for_timeout(50)
    raise AssertionError("the page's socket never opened")
